package linux

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestAProgramUsingTheLibraryRunsItsMainOnce: a program that links the
// backend and calls nothing special first is its own session init (no
// agentbox-init beside it), and the init never runs the program's main:
// the backend's init package takes the re-executed process over before
// main. Were it to reach main, main would run twice and the session fail
// to start.
func TestAProgramUsingTheLibraryRunsItsMainOnce(t *testing.T) {
	testenv.NeedRoot(t, "the linux backend")
	dir := t.TempDir()
	bin := filepath.Join(dir, "embedder")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/embedder").CombinedOutput(); err != nil {
		t.Fatalf("build the embedding program: %v\n%s", err, out)
	}
	log := filepath.Join(dir, "mains")
	out, err := exec.Command(bin, log, filepath.Join(dir, "state")).CombinedOutput()
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("the program: %v\n%s", err, out)
	}
	runs, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(runs), "main ran"); n != 1 {
		t.Fatalf("main ran %d times, want once", n)
	}
}
