package main

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
		open:           "writable by others",
	} {
		err := checkStateDir(dir)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkStateDir(%q) = %v, want an error saying %q", dir, err, want)
		}
	}
	fresh := filepath.Join(top, "fresh", "linux")
	if err := checkStateDir(fresh); err != nil {
		t.Fatalf("checkStateDir(%q): %v", fresh, err)
	}
	fi, err := os.Stat(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("made %s with mode %s, want 0700", fresh, fi.Mode().Perm())
	}
}
