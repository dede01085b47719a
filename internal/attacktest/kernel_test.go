package attacktest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The lists are what every backend's escape tests range over: a name
// used twice would make two subtests of one name (Go renames the second,
// and a reader could not tell them apart), an argument with a space
// would be split in two by Batch, and an attack the helper does not know
// would end the whole batch.
func TestTheAttackListsAreWellFormed(t *testing.T) {
	known := map[string]bool{}
	files, err := filepath.Glob("testdata/attack/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("the helper's sources: %v", err)
	}
	reg := regexp.MustCompile(`register\("([^"]+)"`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range reg.FindAllSubmatch(b, -1) {
			known[string(m[1])] = true
		}
	}
	names := map[string]bool{}
	for _, list := range [][]Attack{Mounts, Namespaces, Kernel, KernelWrites} {
		for _, a := range list {
			if names[a.Name] {
				t.Errorf("two attacks are named %q", a.Name)
			}
			names[a.Name] = true
			if len(a.Args) == 0 || !known[a.Args[0]] {
				t.Errorf("%q: the helper has no attack %q", a.Name, a.Args)
			}
			for _, arg := range a.Args {
				if arg == "" || strings.ContainsAny(arg, " \t\n") {
					t.Errorf("%q: argument %q cannot go through Batch", a.Name, arg)
				}
			}
			if a.Why == "" {
				t.Errorf("%q does not say why it matters", a.Name)
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no attacks")
	}
}

func TestTheHelperIsBuiltOnceAndRemoved(t *testing.T) {
	var b Binary
	p, err := b.Path()
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Path()
	if err != nil || again != p {
		t.Fatalf("the second Path = %q %v, want %q again", again, err, p)
	}
	for _, f := range []string{filepath.Dir(p), p} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o005 != 0o005 {
			t.Errorf("%s is %s: another user could not run the helper from it", f, fi.Mode())
		}
	}
	if err := b.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(p)); !os.IsNotExist(err) {
		t.Errorf("the helper's directory is still there after Remove: %v", err)
	}
	if p, err := b.Path(); err == nil {
		t.Errorf("Path after Remove = %q, want an error", p)
	}
}
