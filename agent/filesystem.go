package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/agentbox/agentbox/internal/bytesize"
	"github.com/agentbox/agentbox/internal/truncate"
	"github.com/agentbox/agentbox/sandbox"
)

// Filesystem is the capability that reads and changes workspace files
// through the session: apply_patch (V4A patches), read_file, write_file,
// list_dir and view_image.
type Filesystem struct {
	// MaxReadLines bounds read_file's answer (default 2000 lines); the
	// answer also stays within DefaultToolOutputBytes, ending at a whole
	// line and saying where to read on.
	MaxReadLines int
	// MaxReadFileBytes is the largest file read_file reads (default
	// DefaultMaxReadFileBytes): a larger one is refused, by its size,
	// before its content enters the harness's memory.
	MaxReadFileBytes int64
	// MaxImageBytes bounds view_image (default 5 MiB).
	MaxImageBytes int
}

// Name implements Capability.
func (f *Filesystem) Name() string { return "filesystem" }

// Instructions implements Capability.
func (f *Filesystem) Instructions() string {
	return `# Files
Edit files with apply_patch, in the V4A format:
*** Begin Patch
*** Update File: path/to/file
@@ a line just above the change (optional)
 context line
-removed line
+added line
*** End Patch
Use "*** Add File: p" (every line starting with +), "*** Delete File: p", and "*** Move to: q" after an Update header. Give about three lines of context around each change. Read files with read_file (a line range), list directories with list_dir, write a whole file with write_file, and look at an image with view_image. Paths are relative to the workspace.`
}

// Tools implements Capability.
func (f *Filesystem) Tools(sess sandbox.Session) []Tool {
	fx := &fileTools{sess: sess, maxLines: f.MaxReadLines, maxImage: f.MaxImageBytes, maxFile: f.MaxReadFileBytes}
	if fx.maxLines <= 0 {
		fx.maxLines = 2000
	}
	if fx.maxFile <= 0 {
		fx.maxFile = DefaultMaxReadFileBytes
	}
	if fx.maxImage <= 0 {
		fx.maxImage = 5 << 20
	}
	return []Tool{
		{Spec: applyPatchSpec, Call: fx.applyPatch},
		{Spec: readFileSpec, Call: fx.readFile},
		{Spec: writeFileSpec, Call: fx.writeFile},
		{Spec: listDirSpec, Call: fx.listDir},
		// A data URL is about 4/3 of the image; let it through whole.
		{Spec: viewImageSpec, Call: fx.viewImage, MaxOutput: fx.maxImage*4/3 + 64},
	}
}

// DefaultMaxReadFileBytes is the largest file read_file reads by default.
const DefaultMaxReadFileBytes = 8 << 20

// readFileAnswerBytes bounds read_file's answer: the tool-output cap, less
// room for the line that says which lines it holds.
const readFileAnswerBytes = DefaultToolOutputBytes - 256

type fileTools struct {
	sess     sandbox.Session
	maxLines int
	maxImage int
	maxFile  int64
}

var applyPatchSpec = mustSpec("apply_patch", "Apply a V4A patch (*** Begin Patch ... *** End Patch) that adds, updates, moves or deletes workspace files. Either every change applies or none does.", `{
  "type": "object",
  "properties": {"input": {"type": "string", "description": "The whole patch text."}},
  "required": ["input"],
  "additionalProperties": false
}`)

var readFileSpec = mustSpec("read_file", "Read a text file, or a range of its lines.", `{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "offset": {"type": "integer", "description": "First line to return, 1-based (default 1)."},
    "limit": {"type": "integer", "description": "Number of lines to return."}
  },
  "required": ["path"],
  "additionalProperties": false
}`)

var writeFileSpec = mustSpec("write_file", "Write a whole file in the workspace, creating or replacing it.", `{
  "type": "object",
  "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
  "required": ["path", "content"],
  "additionalProperties": false
}`)

var listDirSpec = mustSpec("list_dir", "List a workspace directory: names, types and sizes.", `{
  "type": "object",
  "properties": {"path": {"type": "string", "description": "Directory (default the workspace)."}},
  "additionalProperties": false
}`)

var viewImageSpec = mustSpec("view_image", "Look at an image file (PNG, JPEG, GIF or WebP) in the workspace.", `{
  "type": "object",
  "properties": {"path": {"type": "string"}},
  "required": ["path"],
  "additionalProperties": false
}`)

// fileChange is one planned write or removal of a patch.
type fileChange struct {
	path    string
	content string
	remove  bool
	mode    fs.FileMode
	mark    string // A, M, D, or "R old ->"
}

func (fx *fileTools) applyPatch(ctx context.Context, raw json.RawMessage) (string, error) {
	var a struct {
		Input string `json:"input"`
	}
	if err := decodeArgs("apply_patch", raw, &a); err != nil {
		return "", err
	}
	ops, err := ParsePatch(a.Input)
	if err != nil {
		return "", fmt.Errorf("apply_patch: %w", err)
	}
	// Plan every change before writing anything, so that a failing hunk
	// or a path outside the workspace leaves it untouched. Each operation
	// sees the files as the ones before it leave them (two updates of one
	// file both apply; a file the patch adds, it can delete): planned is
	// what the plan has written or removed so far, by workspace path.
	var changes []fileChange
	planned := map[string]fileChange{}
	plan := func(rel string, c fileChange) {
		changes = append(changes, c)
		planned[rel] = c
	}
	// read is a file as the changes planned so far leave it.
	read := func(rel, abs string) (string, error) {
		if c, ok := planned[rel]; ok {
			if c.remove {
				return "", sandbox.Errorf(sandbox.ErrNotFound, "deleted or moved away earlier in this patch")
			}
			return c.content, nil
		}
		data, err := fx.sess.ReadFile(ctx, abs)
		return string(data), err
	}
	for _, op := range ops {
		rel, abs, err := fx.workspacePath(op.Path)
		if err != nil {
			return "", fmt.Errorf("apply_patch: %s %s: %w", op.Kind, op.Path, err)
		}
		switch op.Kind {
		case PatchAdd:
			if _, err := read(rel, abs); err == nil {
				return "", fmt.Errorf("apply_patch: cannot add %s: it already exists (use *** Update File)", op.Path)
			}
			plan(rel, fileChange{path: abs, content: op.Content, mode: 0o644, mark: "A " + op.Path})
		case PatchDelete:
			if _, err := read(rel, abs); err != nil {
				return "", fmt.Errorf("apply_patch: cannot delete %s: %w", op.Path, err)
			}
			plan(rel, fileChange{path: abs, remove: true, mark: "D " + op.Path})
		case PatchUpdate:
			old, err := read(rel, abs)
			if err != nil {
				return "", fmt.Errorf("apply_patch: cannot update %s: %w", op.Path, err)
			}
			updated, err := ApplyHunks(op.Path, old, op.Hunks)
			if err != nil {
				return "", fmt.Errorf("apply_patch: %w", err)
			}
			var mode fs.FileMode
			if c, ok := planned[rel]; ok {
				mode = c.mode
			} else {
				mode = fx.modeOf(ctx, abs)
			}
			toRel, toAbs := rel, abs
			if op.MoveTo != "" {
				if toRel, toAbs, err = fx.workspacePath(op.MoveTo); err != nil {
					return "", fmt.Errorf("apply_patch: move %s to %s: %w", op.Path, op.MoveTo, err)
				}
			}
			// A move compares where the paths lead, not how they are
			// spelled: "./f" is f, and moving f onto itself keeps it.
			if toRel != rel {
				plan(toRel, fileChange{path: toAbs, content: updated, mode: mode, mark: "M " + op.MoveTo + " (moved from " + op.Path + ")"})
				plan(rel, fileChange{path: abs, remove: true})
			} else {
				plan(rel, fileChange{path: abs, content: updated, mode: mode, mark: "M " + op.Path})
			}
		}
	}
	var done []string
	for _, c := range changes {
		if c.remove {
			if err := fx.remove(ctx, c.path); err != nil {
				return "", writeFailed(done, err)
			}
		} else if err := fx.sess.WriteFile(ctx, c.path, []byte(c.content), c.mode); err != nil {
			return "", writeFailed(done, fmt.Errorf("write %s: %w", c.path, err))
		}
		if c.mark != "" {
			done = append(done, c.mark)
		}
	}
	return "Success. Updated the following files:\n" + strings.Join(done, "\n"), nil
}

// writeFailed says which change failed and what the workspace holds now:
// the plan checked every hunk, so only a write can fail here, and the
// changes before it stay applied.
func writeFailed(done []string, err error) error {
	if len(done) == 0 {
		return fmt.Errorf("apply_patch: %w; nothing was changed", err)
	}
	return fmt.Errorf("apply_patch: %w; already applied, and kept: %s; the rest of the patch was not applied", err, strings.Join(done, ", "))
}

// modeOf is the file's permission bits, 0644 when they cannot be read.
func (fx *fileTools) modeOf(ctx context.Context, p string) fs.FileMode {
	entries, err := fx.sess.ListDir(ctx, path.Dir(p))
	if err == nil {
		for _, e := range entries {
			if e.Name == path.Base(p) {
				return e.Mode.Perm()
			}
		}
	}
	return 0o644
}

// workspacePath resolves p as the session's file calls do (relative
// paths from the tools' directory) to its path relative to the workspace
// and its absolute sandbox path. A path that leaves the workspace, or is
// the workspace itself, is refused before the session is asked anything.
func (fx *fileTools) workspacePath(p string) (rel, abs string, err error) {
	if w, ok := fx.sess.(workdirSession); ok {
		p = w.in(p)
	}
	root := fx.sess.State().Spec.Workdir
	if root == "" {
		root = sandbox.DefaultWorkdir
	}
	if rel, err = sandbox.ResolveWorkspacePath(root, p); err != nil {
		return "", "", err
	}
	if rel == "." {
		return "", "", sandbox.Errorf(sandbox.ErrInvalid, "%s is the workspace itself, not a file", p)
	}
	return rel, path.Join(root, rel), nil
}

// remove deletes a workspace file. The session contract has no removal,
// so it runs rm in the sandbox, confined like every other command.
func (fx *fileTools) remove(ctx context.Context, p string) error {
	rel, _, err := fx.workspacePath(p)
	if err != nil {
		return err
	}
	root := fx.sess.State().Spec.Workdir
	if root == "" {
		root = sandbox.DefaultWorkdir
	}
	res, err := sandbox.Exec(ctx, fx.sess, sandbox.ExecRequest{Cmd: []string{"rm", "-f", "--", rel}, Workdir: root})
	if err != nil {
		return fmt.Errorf("delete %s: %w", p, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("delete %s: rm exited %d: %s", p, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

func (fx *fileTools) readFile(ctx context.Context, raw json.RawMessage) (string, error) {
	var a struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := decodeArgs("read_file", raw, &a); err != nil {
		return "", err
	}
	data, err := sandbox.ReadFileLimit(ctx, fx.sess, a.Path, fx.maxFile)
	var big *sandbox.FileSizeError
	if errors.As(err, &big) {
		size := "it is larger"
		if big.Size >= 0 {
			size = fmt.Sprintf("it is %d bytes (%s)", big.Size, bytesize.Format(big.Size))
		}
		return "", fmt.Errorf("read_file %s: %s, over read_file's limit of %d bytes (%s), so it was not read; read the part you need with exec_command (head -n 100, sed -n '200,300p', grep -n, tail -c 4096)",
			a.Path, size, big.Limit, bytesize.Format(big.Limit))
	}
	if err != nil {
		return "", fmt.Errorf("read_file %s: %w", a.Path, err)
	}
	if !isText(data) {
		return "", fmt.Errorf("read_file %s: binary file (%d bytes); use view_image for images or exec_command to inspect it", a.Path, len(data))
	}
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	first := max(a.Offset, 1)
	limit := a.Limit
	if limit <= 0 || limit > fx.maxLines {
		limit = fx.maxLines
	}
	if first > len(lines) && len(lines) > 0 {
		return "", fmt.Errorf("read_file %s: offset %d is past the end (%d lines)", a.Path, first, len(lines))
	}
	last := min(first-1+limit, len(lines))
	// The answer ends at a whole line within the tool-output cap, rather
	// than being cut in its middle; a single line over the cap is cut.
	var body strings.Builder
	n := min(first-1, len(lines))
	for ; n < last && body.Len()+len(lines[n]) <= readFileAnswerBytes; n++ {
		body.WriteString(lines[n])
	}
	switch {
	case n == first-1 && n < last:
		line := lines[n]
		cut := line[:truncate.RuneStart(line, readFileAnswerBytes)]
		return fmt.Sprintf("[line %d of %d is %d bytes; its first %d follow. Read the rest with exec_command (cut -c, head -c, fold)]\n%s", first, len(lines), len(line), len(cut), cut), nil
	case n < last:
		return fmt.Sprintf("[lines %d-%d of %d; the answer stops at %d bytes: read on with offset %d]\n%s", first, n, len(lines), readFileAnswerBytes, n+1, body.String()), nil
	case first == 1 && last == len(lines):
		return body.String(), nil
	}
	return fmt.Sprintf("[lines %d-%d of %d]\n%s", first, last, len(lines), body.String()), nil
}

func (fx *fileTools) writeFile(ctx context.Context, raw json.RawMessage) (string, error) {
	var a struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := decodeArgs("write_file", raw, &a); err != nil {
		return "", err
	}
	if a.Path == "" {
		return "", errors.New("write_file: path is empty")
	}
	if err := fx.sess.WriteFile(ctx, a.Path, []byte(a.Content), fx.modeOf(ctx, a.Path)); err != nil {
		return "", fmt.Errorf("write_file %s: %w", a.Path, err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.Path), nil
}

func (fx *fileTools) listDir(ctx context.Context, raw json.RawMessage) (string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeArgs("list_dir", raw, &a); err != nil {
		return "", err
	}
	p := a.Path
	if p == "" {
		p = "."
	}
	entries, err := fx.sess.ListDir(ctx, p)
	if err != nil {
		return "", fmt.Errorf("list_dir %s: %w", p, err)
	}
	if len(entries) == 0 {
		return p + ": empty directory", nil
	}
	var b strings.Builder
	for _, e := range entries {
		switch {
		case e.IsDir:
			fmt.Fprintf(&b, "%s/\n", e.Name)
		case e.Target != "":
			fmt.Fprintf(&b, "%s -> %s\n", e.Name, e.Target)
		default:
			fmt.Fprintf(&b, "%s\t%d bytes\t%s\n", e.Name, e.Size, e.Mode.Perm())
		}
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// isText reports whether data looks like text: valid enough UTF-8 and no
// NUL byte in its first 8 KiB.
func isText(data []byte) bool {
	head := data[:min(len(data), 8<<10)]
	return !strings.ContainsRune(string(head), 0)
}
