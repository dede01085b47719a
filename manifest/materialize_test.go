package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

func TestMaterializeWritesEveryKind(t *testing.T) {
	f := newFixture(t)
	m := mustLoad(t, "testdata/full.yaml")
	ws := t.TempDir()
	var last, total int64
	got, err := m.Materialize(context.Background(), ws, MaterializeOptions{
		Base: f.base, Trusted: true, UID: -1, GID: -1,
		Progress: func(d, tot int64) { last, total = d, tot },
	})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"README.md":             "Reconcile the statements in data/.\n",
		"run.sh":                "#!/bin/sh\necho ok\n",
		"docs/notes.txt":        "notes",
		"inputs/ledger.csv":     "date,amount\n2026-01-01,10\n",
		"inputs/tree/a.txt":     "a\n",
		"inputs/tree/sub/b.txt": "b\n",
	}
	for p, want := range files {
		b, err := os.ReadFile(filepath.Join(ws, p))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	modes := map[string]os.FileMode{"run.sh": 0o755, "README.md": 0o644, "docs": 0o750 | os.ModeDir, "out": 0o755 | os.ModeDir, "data": 0o755 | os.ModeDir}
	for p, want := range modes {
		fi, err := os.Lstat(filepath.Join(ws, p))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s mode = %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(ws, "inputs/tree/link")); err != nil || target != "a.txt" {
		t.Errorf("inputs/tree/link -> %q, %v; want a.txt", target, err)
	}
	wantMount := sandbox.Mount{Source: filepath.Join(f.base, "src/mounted"), Target: "/workspace/data", ReadOnly: true}
	if len(got.Mounts) != 1 || got.Mounts[0] != wantMount {
		t.Errorf("Mounts = %+v, want [%+v]", got.Mounts, wantMount)
	}
	if _, err := os.Stat(filepath.Join(ws, "data/x.csv")); !os.IsNotExist(err) {
		t.Errorf("the mount's files were copied into the workspace (stat: %v)", err)
	}
	if got.User != "1500:1500" || got.Env["TZ"] != "UTC" || got.Root != "/workspace" {
		t.Errorf("User, Env, Root = %q, %v, %q", got.User, got.Env, got.Root)
	}
	if total == 0 || last != total || got.Bytes != total {
		t.Errorf("progress ended at %d of %d (Bytes %d); want done == total > 0", last, total, got.Bytes)
	}

	// Every input is recorded with the hash of what the agent sees: the
	// bytes written, copied, or (for a mount) read in place.
	inputs := map[string]Input{}
	for _, in := range got.Inputs {
		inputs[in.Path] = in
	}
	mounted, err := os.ReadFile(filepath.Join(f.base, "src/mounted/x.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		path, kind, content string
	}{
		{"README.md", "file", files["README.md"]},
		{"inputs/ledger.csv", "local_file", files["inputs/ledger.csv"]},
		{"inputs/tree/sub/b.txt", "local_dir", files["inputs/tree/sub/b.txt"]},
		{"inputs/tree/link", "local_dir", "a.txt"},
		{"data/x.csv", "mount", string(mounted)},
	} {
		sum := sha256.Sum256([]byte(w.content))
		in, ok := inputs[w.path]
		if !ok || in.Kind != w.kind || in.SHA256 != hex.EncodeToString(sum[:]) || in.Size != int64(len(w.content)) {
			t.Errorf("input %s = %+v (recorded %v), want kind %s and the hash of %q", w.path, in, ok, w.kind, w.content)
		}
	}
	if in := inputs["data/x.csv"]; in.Source != filepath.Join(f.base, "src/mounted/x.csv") {
		t.Errorf("a mount's input does not name its host file: %+v", in)
	}
}

func TestMaterializeChownsToTheSandboxUser(t *testing.T) {
	testenv.NeedRoot(t, "chowning files to another user")
	f := newFixture(t)
	m := Manifest{Entries: map[string]Entry{
		"a/b.txt": {File: &File{Content: "x"}},
		"t":       {LocalDir: &LocalDir{Src: "src/tree"}},
	}}
	ws := t.TempDir()
	if _, err := m.Materialize(context.Background(), ws, MaterializeOptions{Base: f.base, UID: 4321, GID: 4322}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "a/b.txt", "t", "t/sub/b.txt", "t/link"} {
		fi, err := os.Lstat(filepath.Join(ws, p))
		must(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 4321 || st.Gid != 4322 {
			t.Errorf("%s owned by %d:%d, want 4321:4322", p, st.Uid, st.Gid)
		}
	}
}

func TestMaterializeCleansUpAfterAFailure(t *testing.T) {
	f := newFixture(t)
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "z-existing.txt"), []byte("mine"), 0o644))
	m := Manifest{Entries: map[string]Entry{
		"a/new.txt":      {File: &File{Content: "x"}},
		"t":              {LocalDir: &LocalDir{Src: "src/tree"}},
		"z-existing.txt": {File: &File{Content: "overwrite?"}},
	}}
	_, err := m.Materialize(context.Background(), ws, MaterializeOptions{Base: f.base, UID: -1, GID: -1})
	if err == nil || !strings.Contains(err.Error(), `entries["z-existing.txt"]`) {
		t.Fatalf("Materialize = %v, want an error naming z-existing.txt", err)
	}
	names := listNames(t, ws)
	if len(names) != 1 || names[0] != "z-existing.txt" {
		t.Errorf("workspace holds %v after the failure, want only the pre-existing file", names)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "z-existing.txt")); string(b) != "mine" {
		t.Errorf("pre-existing file was changed to %q", b)
	}
}

// The attack: a source is validated, then swapped for a symlink to a host
// secret before the copy runs. The copy must refuse, not follow.
func TestMaterializeRefusesSymlinksSwappedInAfterValidation(t *testing.T) {
	tests := []struct {
		name  string
		entry func(f fixture) (Entry, func())
	}{
		{"a local_file swapped for a link", func(f fixture) (Entry, func()) {
			src := filepath.Join(f.base, "src/ledger.csv")
			return Entry{LocalFile: &LocalFile{Src: "src/ledger.csv"}}, func() {
				must(t, os.Remove(src))
				must(t, os.Symlink(filepath.Join(f.outside, "secret.txt"), src))
			}
		}},
		{"a directory inside a local_dir swapped for a link", func(f fixture) (Entry, func()) {
			sub := filepath.Join(f.base, "src/tree/sub")
			return Entry{LocalDir: &LocalDir{Src: "src/tree"}}, func() {
				must(t, os.RemoveAll(sub))
				must(t, os.Symlink(f.outside, sub))
			}
		}},
		{"a file inside a local_dir swapped for a link", func(f fixture) (Entry, func()) {
			a := filepath.Join(f.base, "src/tree/a.txt")
			return Entry{LocalDir: &LocalDir{Src: "src/tree"}}, func() {
				must(t, os.Remove(a))
				must(t, os.Symlink(filepath.Join(f.outside, "secret.txt"), a))
			}
		}},
		{"the source tree's parent swapped for a link", func(f fixture) (Entry, func()) {
			src := filepath.Join(f.base, "src")
			return Entry{LocalDir: &LocalDir{Src: "src/tree"}}, func() {
				must(t, os.Rename(src, filepath.Join(f.base, "src.old")))
				must(t, os.MkdirAll(filepath.Join(f.outside, "tree"), 0o755))
				must(t, os.WriteFile(filepath.Join(f.outside, "tree/a.txt"), []byte("host secret\n"), 0o644))
				must(t, os.Symlink(f.outside, src))
			}
		}},
		{"a file in a local_dir swapped for a fifo", func(f fixture) (Entry, func()) {
			a := filepath.Join(f.base, "src/tree/a.txt")
			return Entry{LocalDir: &LocalDir{Src: "src/tree"}}, func() {
				must(t, os.Remove(a))
				mkfifo(t, a)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			e, swap := tt.entry(f)
			m := Manifest{Entries: map[string]Entry{"in": e}}
			testHookAfterValidate = swap
			defer func() { testHookAfterValidate = nil }()
			ws := t.TempDir()
			_, err := m.Materialize(context.Background(), ws, MaterializeOptions{Base: f.base, UID: -1, GID: -1})
			if err == nil {
				t.Fatal("Materialize followed the swapped-in link")
			}
			t.Logf("refused: %v", err)
			if names := listNames(t, ws); len(names) != 0 {
				t.Errorf("workspace holds %v after the refusal, want nothing", names)
			}
		})
	}
}

func TestMaterializeDoesNotWriteThroughALinkInTheWorkspace(t *testing.T) {
	f := newFixture(t)
	ws := t.TempDir()
	must(t, os.Symlink(f.outside, filepath.Join(ws, "out")))
	m := Manifest{Entries: map[string]Entry{"out/report.md": {File: &File{Content: "pwned"}}}}
	_, err := m.Materialize(context.Background(), ws, MaterializeOptions{Base: f.base, UID: -1, GID: -1})
	if !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("Materialize = %v, want ErrPathEscape", err)
	}
	if _, err := os.Stat(filepath.Join(f.outside, "report.md")); !os.IsNotExist(err) {
		t.Fatal("a file was written through the workspace symlink onto the host")
	}
}

func TestMaterializeClonesAGitRepo(t *testing.T) {
	testenv.NeedCommand(t, "git")
	f := newFixture(t)
	repo := filepath.Join(f.base, "repo.git")
	work := filepath.Join(t.TempDir(), "work")
	gitRun(t, "", "init", "--quiet", "--bare", "--initial-branch=main", repo)
	gitRun(t, "", "init", "--quiet", "--initial-branch=main", work)
	must(t, os.WriteFile(filepath.Join(work, "hello.txt"), []byte("v1\n"), 0o644))
	gitRun(t, work, "add", ".")
	gitRun(t, work, "commit", "--quiet", "-m", "v1")
	first := strings.TrimSpace(gitRun(t, work, "rev-parse", "HEAD"))
	must(t, os.WriteFile(filepath.Join(work, "hello.txt"), []byte("v2\n"), 0o644))
	gitRun(t, work, "commit", "--quiet", "-am", "v2")
	gitRun(t, work, "tag", "v2")
	gitRun(t, work, "push", "--quiet", "--tags", repo, "main")

	tests := []struct {
		name, ref, want string
	}{
		{"the default branch", "", "v2\n"},
		{"a tag", "v2", "v2\n"},
		{"a full commit id", first, "v1\n"},
		{"an abbreviated commit id", first[:10], "v1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Manifest{Entries: map[string]Entry{"src/repo": {GitRepo: &GitRepo{URL: "repo.git", Ref: tt.ref}}}}
			ws := t.TempDir()
			got, err := m.Materialize(context.Background(), ws, MaterializeOptions{Base: f.base, UID: -1, GID: -1})
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(ws, "src/repo/hello.txt"))
			if err != nil || string(b) != tt.want {
				t.Errorf("hello.txt = %q, %v; want %q", b, err, tt.want)
			}
			if _, err := os.Stat(filepath.Join(ws, "src/repo/.git")); err != nil {
				t.Errorf(".git was not kept: %v", err)
			}
			if in := got.Inputs; len(in) != 1 || in[0].Kind != "git_repo" || len(in[0].Commit) != 40 || (tt.ref == first && in[0].Commit != first) {
				t.Errorf("inputs = %+v, want the commit checked out", in)
			}
		})
	}
	t.Run("a clone past its timeout fails as a timeout", func(t *testing.T) {
		m := Manifest{Entries: map[string]Entry{"r": {GitRepo: &GitRepo{URL: "repo.git", Timeout: Duration(time.Nanosecond)}}}}
		_, err := m.Materialize(context.Background(), t.TempDir(), MaterializeOptions{Base: f.base, UID: -1, GID: -1})
		if !errors.Is(err, sandbox.ErrTimeout) {
			t.Fatalf("Materialize = %v, want ErrTimeout", err)
		}
	})
	t.Run("a missing ref fails and leaves nothing", func(t *testing.T) {
		m := Manifest{Entries: map[string]Entry{"r": {GitRepo: &GitRepo{URL: "repo.git", Ref: "no-such-branch"}}}}
		ws := t.TempDir()
		_, err := m.Materialize(context.Background(), ws, MaterializeOptions{Base: f.base, UID: -1, GID: -1})
		if err == nil || !strings.Contains(err.Error(), "no-such-branch") {
			t.Fatalf("Materialize = %v, want an error naming the ref", err)
		}
		if names := listNames(t, ws); len(names) != 0 {
			t.Errorf("workspace holds %v", names)
		}
	})
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func listNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
