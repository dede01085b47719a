package artifact

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPromoteDoesNotFollowASymlinkPlantedInTheDestination: when the
// destination is a directory the sandbox can also write (a shared results
// directory, one mounted read-write into the session), the agent can plant
// dest/out -> /etc ahead of time; promoting out/report.md must not rename
// the staged file through that link onto the host path it names.
func TestPromoteDoesNotFollowASymlinkPlantedInTheDestination(t *testing.T) {
	ws := workspace(t, map[string]string{"out/report.md": "pwned\n"})
	rules := &Rules{Outputs: []Output{{Glob: "out/*.md"}}}
	outside := t.TempDir()
	dest := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(dest, "out")))
	_, err := promoteDir(t, ws, rules, dest, PromoteOptions{})
	if _, serr := os.Lstat(filepath.Join(outside, "report.md")); serr == nil {
		t.Fatalf("Promote = %v and wrote report.md through the planted link into %s", err, outside)
	}
	if err == nil {
		t.Fatal("Promote succeeded through a destination directory that is a symlink")
	}
	t.Logf("refused: %v", err)
	if fi, err := os.Lstat(filepath.Join(dest, "out")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was changed: %v %v", fi, err)
	}
	assertNoStaging(t, dest)
}

// TestPromoteRefusesADestinationInsideTheWorkspace: outputs promoted into
// the workspace they come from have not left the sandbox's reach, and the
// sandbox could shape the destination while the promotion runs.
func TestPromoteRefusesADestinationInsideTheWorkspace(t *testing.T) {
	ws := workspace(t, map[string]string{"out/report.md": "ok\n"})
	rules := &Rules{Outputs: []Output{{Glob: "out/*.md"}}}
	for _, dest := range []string{ws, filepath.Join(ws, "promoted"), filepath.Join(ws, "out", "new", "deeper")} {
		_, err := promoteDir(t, ws, rules, dest, PromoteOptions{})
		if err == nil || !strings.Contains(err.Error(), "inside the workspace") {
			t.Errorf("Promote into %s = %v, want a refusal: the destination is inside the workspace", dest, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "promoted")); err == nil {
		t.Error("the refused promotion created its destination inside the workspace")
	}
}
