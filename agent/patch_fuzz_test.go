package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// FuzzPatch parses arbitrary text as a V4A patch and applies it with the
// apply_patch tool to an in-memory workspace (one of whose files is also
// fuzzed). It checks that nothing panics and that:
//   - a parsed patch prints back to text that parses to the same patch;
//   - a hunk changes a file's line count by its added minus removed lines;
//   - apply_patch does what applying the operations one after another
//     does (the model below), or fails and changes nothing;
//   - no path the tool touches leaves the workspace.
func FuzzPatch(f *testing.F) {
	f.Add("*** Begin Patch\n*** Update File: f.txt\n@@\n a\n-b\n+B\n c\n*** End Patch", "a\nb\nc\n")
	f.Fuzz(func(t *testing.T, patch, file string) {
		// The tool gets its input as JSON, as a model sends it, so the
		// patch is what survives the trip (invalid UTF-8 becomes U+FFFD).
		args, _ := json.Marshal(map[string]string{"input": patch})
		var in struct{ Input string }
		if err := json.Unmarshal(args, &in); err != nil {
			t.Fatal(err)
		}
		patch = in.Input
		ops, perr := ParsePatch(patch)
		if perr == nil {
			checkParsed(t, ops)
			for _, op := range ops {
				if op.Kind == PatchUpdate {
					checkHunks(t, file, op.Hunks)
				}
			}
		}
		tree := map[string]string{"f.txt": file, "dir/g.txt": "one\ntwo\nthree\n", "crlf.txt": "a\r\nb\r\n"}
		want, wantErr := applySequentially(tree, ops)
		sess := &memSession{files: maps.Clone(tree)}
		fx := &fileTools{sess: sess, maxLines: 100}
		_, err := fx.applyPatch(context.Background(), args)
		switch {
		case perr != nil && err == nil:
			t.Fatalf("apply_patch accepted a patch ParsePatch refuses (%v)", perr)
		case err != nil && !maps.Equal(sess.files, tree):
			t.Fatalf("apply_patch failed (%v) but changed the workspace:\n%q\nwas\n%q", err, sess.files, tree)
		case perr != nil:
		case wantErr == nil && err != nil:
			t.Fatalf("apply_patch failed (%v); applied one by one, the operations give\n%q", err, want)
		case wantErr != nil && err == nil:
			t.Fatalf("apply_patch succeeded, giving\n%q\nbut applied one by one the operations fail: %v", sess.files, wantErr)
		case err == nil && !maps.Equal(sess.files, want):
			t.Fatalf("apply_patch gave\n%q\napplied one by one, the operations give\n%q", sess.files, want)
		}
		for _, p := range sess.touched {
			if _, err := sandbox.ResolveWorkspacePath(sandbox.DefaultWorkdir, p); err != nil && !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("the tool asked the session for %q, outside the workspace: %v", p, err)
			}
		}
	})
}

// checkParsed checks what ParsePatch promises of a patch it accepts, and
// that the patch prints back to text that parses to the same operations.
func checkParsed(t *testing.T, ops []PatchOp) {
	t.Helper()
	if len(ops) == 0 {
		t.Fatal("ParsePatch accepted a patch without operations")
	}
	for _, op := range ops {
		if op.Path == "" || op.Path != strings.TrimSpace(op.Path) {
			t.Fatalf("operation path %q", op.Path)
		}
		if op.Kind == PatchAdd && op.Content != "" && !strings.HasSuffix(op.Content, "\n") {
			t.Fatalf("added content %q does not end its last line", op.Content)
		}
		if op.Kind == PatchUpdate && len(op.Hunks) == 0 && op.MoveTo == "" {
			t.Fatalf("update of %s without hunks or move", op.Path)
		}
		for _, h := range op.Hunks {
			if len(h.Lines) == 0 {
				t.Fatalf("hunk without lines in %s", op.Path)
			}
			for _, l := range h.Lines {
				if l == "" || !strings.ContainsRune(" -+", rune(l[0])) {
					t.Fatalf("hunk line %q", l)
				}
			}
		}
	}
	text := formatPatch(ops)
	again, err := ParsePatch(text)
	if err != nil {
		t.Fatalf("the printed patch does not parse: %v\n%s", err, text)
	}
	if !reflect.DeepEqual(withoutLines(again), withoutLines(ops)) {
		t.Fatalf("the printed patch parses to\n%#v\nnot\n%#v\ntext:\n%s", again, ops, text)
	}
}

// formatPatch prints operations as V4A text.
func formatPatch(ops []PatchOp) string {
	var b strings.Builder
	b.WriteString(patchBegin + "\n")
	for _, op := range ops {
		switch op.Kind {
		case PatchAdd:
			b.WriteString(patchAdd + op.Path + "\n")
			if op.Content != "" {
				for _, l := range strings.Split(strings.TrimSuffix(op.Content, "\n"), "\n") {
					b.WriteString("+" + l + "\n")
				}
			}
		case PatchDelete:
			b.WriteString(patchDelete + op.Path + "\n")
		case PatchUpdate:
			b.WriteString(patchUpdate + op.Path + "\n")
			if op.MoveTo != "" {
				b.WriteString(patchMove + op.MoveTo + "\n")
			}
			for _, h := range op.Hunks {
				if len(h.Anchors) == 0 {
					b.WriteString("@@\n")
				}
				for _, a := range h.Anchors {
					b.WriteString("@@ " + a + "\n")
				}
				for _, l := range h.Lines {
					b.WriteString(l + "\n")
				}
				if h.AtEOF {
					b.WriteString(patchEOF + "\n")
				}
			}
		}
	}
	b.WriteString(patchEnd + "\n")
	return b.String()
}

// withoutLines drops what only says where a hunk was in the patch text.
func withoutLines(ops []PatchOp) []PatchOp {
	out := make([]PatchOp, len(ops))
	for i, op := range ops {
		hunks := make([]Hunk, len(op.Hunks))
		for j, h := range op.Hunks {
			h.line = 0
			hunks[j] = h
		}
		op.Hunks = hunks
		out[i] = op
	}
	return out
}

// checkHunks applies hunks to file and, when they apply, checks the line
// count: the file's, plus the added lines, minus the removed ones.
func checkHunks(t *testing.T, file string, hunks []Hunk) {
	t.Helper()
	out, err := ApplyHunks("f", file, hunks)
	if err != nil {
		return
	}
	delta := 0
	for _, h := range hunks {
		for _, l := range h.Lines {
			switch l[0] {
			case '+':
				delta++
			case '-':
				delta--
			}
		}
	}
	if got, want := countLines(out), countLines(file)+delta; got != want {
		t.Fatalf("ApplyHunks(%q) = %q: %d lines, want %d", file, out, got, want)
	}
}

func countLines(s string) int {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
}

// applySequentially is the model of apply_patch: each operation applied
// to the files as the previous ones left them.
func applySequentially(tree map[string]string, ops []PatchOp) (map[string]string, error) {
	files := maps.Clone(tree)
	resolve := func(p string) (string, error) {
		rel, err := sandbox.ResolveWorkspacePath(sandbox.DefaultWorkdir, p)
		if err == nil && rel == "." {
			err = errors.New("the workspace itself")
		}
		return rel, err
	}
	for _, op := range ops {
		p, err := resolve(op.Path)
		if err != nil {
			return nil, err
		}
		old, exists := files[p]
		switch op.Kind {
		case PatchAdd:
			if exists {
				return nil, errors.New("add: exists")
			}
			files[p] = op.Content
		case PatchDelete:
			if !exists {
				return nil, errors.New("delete: missing")
			}
			delete(files, p)
		case PatchUpdate:
			if !exists {
				return nil, errors.New("update: missing")
			}
			updated, err := ApplyHunks(p, old, op.Hunks)
			if err != nil {
				return nil, err
			}
			to := p
			if op.MoveTo != "" {
				if to, err = resolve(op.MoveTo); err != nil {
					return nil, err
				}
			}
			delete(files, p)
			files[to] = updated
		}
	}
	return files, nil
}

// memSession is a workspace in memory: files by their path relative to
// the workspace, with no directories of their own. It resolves paths as
// every backend does and records each one it was asked for.
type memSession struct {
	sandbox.Session // not used: the tool calls only what is defined below
	files           map[string]string
	touched         []string
}

func (m *memSession) resolve(p string) (string, error) {
	m.touched = append(m.touched, p)
	return sandbox.ResolveWorkspacePath(sandbox.DefaultWorkdir, p)
}

func (m *memSession) State() sandbox.State { return sandbox.State{} }

func (m *memSession) ReadFile(_ context.Context, p string) ([]byte, error) {
	rel, err := m.resolve(p)
	if err != nil {
		return nil, err
	}
	data, ok := m.files[rel]
	if !ok {
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "%s: no such file", p)
	}
	return []byte(data), nil
}

func (m *memSession) WriteFile(_ context.Context, p string, data []byte, _ fs.FileMode) error {
	rel, err := m.resolve(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return sandbox.Errorf(sandbox.ErrInvalid, "%s is the workspace", p)
	}
	m.files[rel] = string(data)
	return nil
}

func (m *memSession) ListDir(_ context.Context, p string) ([]sandbox.FileInfo, error) {
	rel, err := m.resolve(p)
	if err != nil {
		return nil, err
	}
	var out []sandbox.FileInfo
	for name := range m.files {
		if path.Dir(name) == rel {
			out = append(out, sandbox.FileInfo{Name: path.Base(name), Mode: 0o644})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Start runs the one command the tool runs, rm -f -- rel, at once.
func (m *memSession) Start(_ context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if len(req.Cmd) != 4 || req.Cmd[0] != "rm" || req.Cmd[1] != "-f" || req.Cmd[2] != "--" {
		return nil, errors.New("memSession runs only rm -f -- path")
	}
	rel, err := m.resolve(req.Cmd[3])
	if err != nil {
		return nil, err
	}
	delete(m.files, rel)
	return ended{}, nil
}

// ended is a process that has exited 0 without output.
type ended struct{ sandbox.Process }

func (ended) Stdin() io.WriteCloser                            { return nopCloser{io.Discard} }
func (ended) Stdout() io.Reader                                { return strings.NewReader("") }
func (ended) Stderr() io.Reader                                { return strings.NewReader("") }
func (ended) Wait(context.Context) (sandbox.ExitStatus, error) { return sandbox.ExitStatus{}, nil }
func (ended) Kill(context.Context) error                       { return nil }
func (ended) Close() error                                     { return nil }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
