package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStateDirFromTheEnvironmentMustBePrivate(t *testing.T) {
	top := t.TempDir()
	open := filepath.Join(top, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	for dir, want := range map[string]string{
		"relative/dir": "absolute path",
		open:           "open to others",
	} {
		_, err := checkStateDir(dir)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkStateDir(%q) = %v, want an error saying %q", dir, err, want)
		}
	}
	below := filepath.Join(open, "state") // private, but its parent is not
	if _, err := checkStateDir(below); err == nil || !strings.Contains(err.Error(), "not sticky") {
		t.Errorf("checkStateDir(%q) = %v, want an error about its open parent", below, err)
	}
	fresh := filepath.Join(top, "fresh", "linux")
	got, err := checkStateDir(fresh + "//")
	if err != nil {
		t.Fatalf("checkStateDir(%q): %v", fresh, err)
	}
	if got != fresh {
		t.Errorf("checkStateDir(%q//) = %q, want it cleaned to %q", fresh, got, fresh)
	}
	fi, err := os.Stat(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("made %s with mode %s, want 0700", fresh, fi.Mode().Perm())
	}
}
