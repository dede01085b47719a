package sandboxtest

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

func fileTests() []testCase {
	return []testCase{
		{name: "files round-trip through WriteFile, ReadFile and ListDir", run: testFileRoundTrip},
		{name: "file paths that do not exist or leave the workspace are refused by kind", run: testFileErrors},
		{name: "a file written by WriteFile is seen by commands and the reverse", run: testFilesSharedWithCommands},
	}
}

func testFileRoundTrip(t *testing.T, s *suite) {
	_, sess := s.session(t)
	c := ctx(t)
	workdir := sess.State().Spec.Workdir
	if workdir == "" {
		workdir = sandbox.DefaultWorkdir
	}
	files := []struct {
		path string
		data string
		mode fs.FileMode
	}{
		{"a.txt", "alpha\n", 0o644},
		{"nested/deep/run.sh", "#!/bin/sh\necho ran\n", 0o755},
		{workdir + "/abs.txt", "by absolute path", 0o600},
		{"empty", "", 0o644},
	}
	for _, f := range files {
		if err := sess.WriteFile(c, f.path, []byte(f.data), f.mode); err != nil {
			t.Fatalf("write %s: %v", f.path, err)
		}
	}
	for _, f := range files {
		got, err := sess.ReadFile(c, f.path)
		if err != nil || string(got) != f.data {
			t.Fatalf("read %s = %q, %v; want %q", f.path, got, err, f.data)
		}
	}
	// Overwrite replaces the content.
	if err := sess.WriteFile(c, "a.txt", []byte("beta"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := sess.ReadFile(c, "a.txt"); string(got) != "beta" {
		t.Fatalf("after overwrite a.txt = %q", got)
	}

	list, err := sess.ListDir(c, ".")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]sandbox.FileInfo{}
	var names []string
	for _, fi := range list {
		byName[fi.Name] = fi
		names = append(names, fi.Name)
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("ListDir is not sorted by name: %v", names)
		}
	}
	for _, want := range []string{"a.txt", "abs.txt", "empty", "nested"} {
		if _, ok := byName[want]; !ok {
			t.Fatalf("ListDir(.) = %v, missing %s", names, want)
		}
	}
	if fi := byName["a.txt"]; fi.IsDir || fi.Size != 4 || fi.Mode.Perm() != 0o644 {
		t.Errorf("a.txt = %+v, want a 4-byte 0644 file", fi)
	}
	if fi := byName["abs.txt"]; fi.Mode.Perm() != 0o600 {
		t.Errorf("abs.txt mode %v, want 0600", fi.Mode.Perm())
	}
	if fi := byName["nested"]; !fi.IsDir || !fi.Mode.IsDir() {
		t.Errorf("nested = %+v, want a directory", fi)
	}
	deep, err := sess.ListDir(c, workdir+"/nested/deep")
	if err != nil {
		t.Fatal(err)
	}
	if len(deep) != 1 || deep[0].Name != "run.sh" || deep[0].Mode.Perm() != 0o755 {
		t.Fatalf("ListDir(nested/deep) = %+v, want run.sh 0755", deep)
	}
	res := shOK(t, sess, "./nested/deep/run.sh")
	if string(res.Stdout) != "ran\n" {
		t.Fatalf("running the written script printed %q", res.Stdout)
	}
	// A symlink made by a command is listed as a link with its target.
	shOK(t, sess, "ln -s a.txt link")
	list, err = sess.ListDir(c, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range list {
		if fi.Name == "link" && (fi.Mode&fs.ModeSymlink == 0 || fi.Target != "a.txt") {
			t.Errorf("link = %+v, want a symlink to a.txt", fi)
		}
	}
}

func testFileErrors(t *testing.T, s *suite) {
	_, sess := s.session(t)
	c := ctx(t)
	tests := []struct {
		name string
		op   func() error
		kind error
	}{
		{"reading a missing file is not found", func() error { _, err := sess.ReadFile(c, "missing.txt"); return err }, sandbox.ErrNotFound},
		{"listing a missing directory is not found", func() error { _, err := sess.ListDir(c, "no/such/dir"); return err }, sandbox.ErrNotFound},
		{"reading ../x is a path escape", func() error { _, err := sess.ReadFile(c, "../x"); return err }, sandbox.ErrPathEscape},
		{"writing ../x is a path escape", func() error { return sess.WriteFile(c, "../x", []byte("x"), 0o644) }, sandbox.ErrPathEscape},
		{"writing a/../../x is a path escape", func() error { return sess.WriteFile(c, "a/../../x", []byte("x"), 0o644) }, sandbox.ErrPathEscape},
		{"listing ../ is a path escape", func() error { _, err := sess.ListDir(c, ".."); return err }, sandbox.ErrPathEscape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(); !errors.Is(err, tt.kind) {
				t.Fatalf("err = %v, want %v", err, tt.kind)
			}
		})
	}
	// A symlink planted by a command that points out of the workspace
	// never makes ReadFile return the host's file.
	shOK(t, sess, "ln -s /etc/passwd passwd-link; ln -s ../../../../../../etc/passwd rel-link")
	for _, p := range []string{"passwd-link", "rel-link"} {
		got, err := sess.ReadFile(c, p)
		if err == nil && strings.Contains(string(got), "root:") {
			inside := shOK(t, sess, "cat "+p)
			if string(inside.Stdout) != string(got) {
				t.Errorf("ReadFile(%s) returned a file the sandbox itself does not see there", p)
			}
		}
	}
}

func testFilesSharedWithCommands(t *testing.T, s *suite) {
	_, sess := s.session(t)
	c := ctx(t)
	if err := sess.WriteFile(c, "in/host.txt", []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := shOK(t, sess, "cat in/host.txt && mkdir -p out && printf 'from the command' > out/cmd.txt && echo more >> in/host.txt")
	if string(res.Stdout) != "from the host\n" {
		t.Fatalf("the command read %q", res.Stdout)
	}
	got, err := sess.ReadFile(c, "out/cmd.txt")
	if err != nil || string(got) != "from the command" {
		t.Fatalf("ReadFile(out/cmd.txt) = %q, %v", got, err)
	}
	got, err = sess.ReadFile(c, "in/host.txt")
	if err != nil || string(got) != "from the host\nmore\n" {
		t.Fatalf("the command could not append to a WriteFile'd file: %q, %v", got, err)
	}
}
