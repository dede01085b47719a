package artifact

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/fsmode"
	"github.com/agentbox/agentbox/sandbox"
)

// SessionSource is the workspace of a live session, read as the sandbox
// sees it (Session.ListDir and Session.ReadFile). Hard-link counts are not
// part of ListDir, so they are asked of stat(1) inside the sandbox; when
// that fails the count stays unknown and the no-hard-links rule fails.
type SessionSource struct {
	s    sandbox.Session
	root string
}

// NewSessionSource reads the workspace of s at its workdir.
func NewSessionSource(s sandbox.Session) *SessionSource {
	root := s.State().Spec.Workdir
	if root == "" {
		root = sandbox.DefaultWorkdir
	}
	return &SessionSource{s: s, root: root}
}

// Describe implements Source.
func (s *SessionSource) Describe() string { return "session:" + s.s.State().String() }

// Where implements Source: the sandbox path.
func (s *SessionSource) Where(rel string) string { return s.root + "/" + rel }

// statBatch is how many paths one stat(1) call gets.
const statBatch = 200

// List implements Source.
func (s *SessionSource) List(ctx context.Context, descend func(string) bool) ([]Entry, error) {
	var out []Entry
	if err := s.walk(ctx, "", descend, &out); err != nil {
		return nil, err
	}
	var files []int
	for i, e := range out {
		if e.Mode.IsRegular() {
			files = append(files, i)
		}
	}
	for start := 0; start < len(files); start += statBatch {
		batch := files[start:min(start+statBatch, len(files))]
		s.linkCounts(ctx, out, batch)
	}
	return out, nil
}

func (s *SessionSource) walk(ctx context.Context, rel string, descend func(string) bool, out *[]Entry) error {
	p := s.root
	if rel != "" {
		p = s.root + "/" + rel
	}
	infos, err := s.s.ListDir(ctx, p)
	if err != nil {
		return sandbox.Wrap("artifact: list "+p, nil, err)
	}
	for _, fi := range infos {
		r := path.Join(rel, fi.Name)
		e := Entry{Path: r, Mode: fi.Mode, Size: fi.Size, Target: fi.Target}
		if fi.IsDir {
			e.Mode |= fs.ModeDir // in case a backend only set IsDir
		}
		*out = append(*out, e)
		if e.Mode.IsDir() && (descend == nil || descend(r)) {
			if err := s.walk(ctx, r, descend, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// linkCounts fills Nlink for out[idx...] from `stat -c '%h %n'` run in
// the sandbox. Names containing a newline cannot be parsed and stay
// unknown.
func (s *SessionSource) linkCounts(ctx context.Context, out []Entry, idx []int) {
	cmd := []string{"stat", "-c", "%h %n", "--"}
	for _, i := range idx {
		cmd = append(cmd, s.Where(out[i].Path))
	}
	res, err := sandbox.Exec(ctx, s.s, sandbox.ExecRequest{Cmd: cmd, Workdir: s.root})
	if err != nil || res.ExitCode != 0 {
		why := fmt.Sprintf("stat in the sandbox failed: %v %s", err, bytes.TrimSpace(res.Stderr))
		for _, i := range idx {
			out[i].Note = why
		}
		return
	}
	counts := map[string]uint64{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		n, name, ok := strings.Cut(line, " ")
		if v, err := strconv.ParseUint(n, 10, 64); ok && err == nil {
			counts[name] = v
		}
	}
	for _, i := range idx {
		if v, ok := counts[s.Where(out[i].Path)]; ok {
			out[i].Nlink = v
		} else {
			out[i].Note = "stat in the sandbox did not report it"
		}
	}
}

// Open implements Source. ReadFile resolves inside the sandbox's root, so
// what it reads is something the sandbox can see anyway; the entry is
// listed again afterwards so that a file swapped for a link or grown
// while being read is noticed.
func (s *SessionSource) Open(ctx context.Context, rel string) (io.ReadCloser, Entry, error) {
	data, err := s.s.ReadFile(ctx, s.Where(rel))
	if err != nil {
		return nil, Entry{}, sandbox.Wrap("artifact: read "+s.Where(rel), nil, err)
	}
	parent, name := s.root, rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		parent, name = s.Where(rel[:i]), rel[i+1:]
	}
	infos, err := s.s.ListDir(ctx, parent)
	if err != nil {
		return nil, Entry{}, sandbox.Wrap("artifact: list "+parent, nil, err)
	}
	for _, fi := range infos {
		if fi.Name != name {
			continue
		}
		e := Entry{Path: rel, Mode: fi.Mode, Size: fi.Size, Target: fi.Target, Nlink: 1}
		if !fi.Mode.IsRegular() || fi.IsDir {
			return nil, e, fmt.Errorf("artifact: %s is a %s now, not a regular file", s.Where(rel), fsmode.Describe(fi.Mode))
		}
		if fi.Size != int64(len(data)) {
			return nil, e, fmt.Errorf("artifact: %s changed while being read (%d bytes read, %d listed)", s.Where(rel), len(data), fi.Size)
		}
		return io.NopCloser(bytes.NewReader(data)), e, nil
	}
	return nil, Entry{}, sandbox.Errorf(sandbox.ErrNotFound, "artifact: %s vanished while being read", s.Where(rel))
}
