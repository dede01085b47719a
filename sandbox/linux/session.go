package linux

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"github.com/agentbox/agentbox/sandbox/wsfs"
)

// session is one live linux sandbox as seen from a client.
type session struct {
	c   *Client
	g   *cgroups.Group
	uid int
	gid int
	// path is the commands' PATH (sandboxPath), fixed when the session
	// is opened.
	path string

	mu     sync.Mutex
	st     sandbox.State // its Handles are h's, encoded by State
	h      handles
	closed bool
	root   *wsfs.Root
	egress *egressBridge
	// child is the init when this client started it (nil when resumed).
	child *initChild
	// watches are the session's watches (watch.go), ended by stop.
	watches wsfs.Watches
}

func newSession(c *Client, st sandbox.State, h handles, g *cgroups.Group) *session {
	uid, gid, _ := parseUser(st.Spec.User)
	st.Handles = nil
	return &session{c: c, st: st, h: h, g: g, uid: uid, gid: gid, path: sandboxPath("/", st.Spec.Mounts)}
}

// ID is the session's id.
func (s *session) ID() string { return s.st.ID }

// State is the serializable description of the session.
func (s *session) State() sandbox.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Version = sandbox.StateVersion
	st.Handles = sandbox.EncodeHandles(s.h)
	return st
}

func (s *session) workdir() string        { return workdirOf(s.st.Spec) }
func (s *session) policy() sandbox.Policy { return s.st.Spec.Policy }

// egressRef is the session's egress bridge, or nil.
func (s *session) egressRef() *egressBridge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.egress
}

// saveState writes state.json in the session directory, so that Delete
// and tools can find what a session holds.
func (s *session) saveState() error { return writeState(s.h.StateDir, s.State()) }

// live checks that the session may still be used.
func (s *session) live(op string) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return sandbox.Wrap("linux: "+op, sandbox.ErrClosed, fmt.Errorf("session %s was closed", s.st.ID))
	}
	if s.pastDeadline() {
		return sandbox.Wrap("linux: "+op, sandbox.ErrTimeout, fmt.Errorf("session %s passed its session timeout", s.st.ID))
	}
	return nil
}

// pastDeadline reports whether the session timeout has passed.
func (s *session) pastDeadline() bool {
	return !s.h.Deadline.IsZero() && time.Now().After(s.h.Deadline)
}

// dial opens a control connection to the init.
func (s *session) dial(op string) (*net.UnixConn, error) {
	c, err := control.Dial(s.h.Socket)
	if err != nil {
		if lerr := s.live(op); lerr != nil {
			return nil, lerr
		}
		return nil, sandbox.Wrap("linux: "+op, sandbox.ErrGone, fmt.Errorf("session %s is not running: %w", s.st.ID, err))
	}
	return c, nil
}

// env is the command's environment: the spec's, what the backend must
// set, then the request's overrides. The host's is never inherited.
func (s *session) env(req sandbox.ExecRequest) []string {
	m := map[string]string{
		"PATH":    s.path,
		"HOME":    "/tmp",
		"USER":    "sandbox",
		"LOGNAME": "sandbox",
		"LANG":    "C.UTF-8",
	}
	if s.uid == 0 {
		m["USER"], m["LOGNAME"] = "root", "root"
	}
	for k, v := range s.st.Spec.Env {
		m[k] = v
	}
	if e := s.egressRef(); e != nil {
		for k, v := range e.env() {
			m[k] = v
		}
	}
	if req.TTY {
		if _, ok := m["TERM"]; !ok {
			m["TERM"] = "xterm-256color"
		}
	}
	for k, v := range req.Env {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// cwd resolves a request's working directory in the sandbox. Absolute
// paths may be anywhere in the sandbox (it is all confined); a relative
// one is taken from the workdir and must not climb out of it.
func (s *session) cwd(dir string) (string, error) {
	switch {
	case dir == "":
		return s.workdir(), nil
	case path.IsAbs(dir):
		return path.Clean(dir), nil
	}
	rel, err := sandbox.ResolveWorkspacePath(s.workdir(), dir)
	if err != nil {
		return "", err
	}
	return path.Join(s.workdir(), rel), nil
}

// fsRoot opens the workspace as the sandbox sees it (through the init's
// root, so mounts inside the workspace are seen as they are there), or
// the host workspace when the init is gone.
func (s *session) fsRoot(op string) (*wsfs.Root, error) {
	if err := s.live(op); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root != nil {
		return s.root, nil
	}
	dir := filepath.Join("/proc", strconv.Itoa(s.h.InitPID), "root", s.workdir())
	if !initAlive(s.h.InitPID, s.st.ID) {
		return nil, sandbox.Wrap("linux: "+op, sandbox.ErrGone, fmt.Errorf("session %s is not running", s.st.ID))
	}
	r, err := wsfs.Open(dir)
	if err != nil {
		return nil, sandbox.Wrap("linux: "+op, nil, err)
	}
	s.root = r
	return r, nil
}

// maxReadFile bounds ReadFile.
const maxReadFile = 64 << 20

// ReadFile reads a file as the sandbox sees it, of at most maxReadFile
// bytes.
func (s *session) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return s.ReadFileLimit(ctx, p, maxReadFile)
}

// ReadFileLimit reads a file of at most max bytes (and maxReadFile),
// refusing a larger one before reading it (sandbox.LimitedReader).
func (s *session) ReadFileLimit(ctx context.Context, p string, max int64) ([]byte, error) {
	rel, err := sandbox.ResolveWorkspacePath(s.workdir(), p)
	if err != nil {
		return nil, err
	}
	r, err := s.fsRoot("read file")
	if err != nil {
		return nil, err
	}
	if max < 1 || max > maxReadFile {
		max = maxReadFile // never unbounded: wsfs reads 0 as no limit
	}
	return r.ReadFile(rel, max)
}

// WriteFile writes a file in the workspace, owned by the session user.
func (s *session) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	rel, err := sandbox.ResolveWorkspacePath(s.workdir(), p)
	if err != nil {
		return err
	}
	r, err := s.fsRoot("write file")
	if err != nil {
		return err
	}
	if s.h.IDBase == 0 {
		// Rootless: the session user is this process's user, and what it
		// creates is the session user's already.
		return r.WriteFile(rel, data, mode, -1, -1)
	}
	// The workspace is idmapped (see idmap.go): what is made in it must be
	// made as the session user, whose host ids the mount maps to the
	// owner's, and so lands as the owner's.
	return asHostIDs(int(s.h.IDBase)+s.uid, int(s.h.IDBase)+s.gid, func() error {
		return r.WriteFile(rel, data, mode, -1, -1)
	})
}

// asHostIDs runs f on a thread whose file-system ids are uid and gid, and
// sets them back after. File-system ids are per thread: the goroutine is
// locked to its thread meanwhile, so every call f makes uses them.
func asHostIDs(uid, gid int, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Setfsgid(gid)
	unix.Setfsuid(uid)
	defer func() {
		unix.Setfsuid(0)
		unix.Setfsgid(0)
	}()
	return f()
}

// ListDir lists a directory as the sandbox sees it.
func (s *session) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	rel, err := sandbox.ResolveWorkspacePath(s.workdir(), p)
	if err != nil {
		return nil, err
	}
	r, err := s.fsRoot("list directory")
	if err != nil {
		return nil, err
	}
	return r.ListDir(rel)
}

// Snapshot saves the workspace, minus mounts inside it, to the client's
// snapshot store.
func (s *session) Snapshot(ctx context.Context) (string, error) {
	if s.c.opts.Snapshots == nil {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "linux: snapshot: the client has no snapshot store")
	}
	if err := s.live("snapshot"); err != nil {
		return "", err
	}
	var exclude []string
	for _, m := range s.st.Spec.Mounts {
		if rel, err := sandbox.ResolveWorkspacePath(s.workdir(), m.Target); err == nil && rel != "." {
			exclude = append(exclude, rel)
		}
	}
	ref, err := s.c.opts.Snapshots.Save(ctx, s.st.Workspace, exclude, workspaceBound(s.st.Spec, s.h.WorkspaceTmpfs))
	if err != nil {
		return "", sandbox.Wrap("linux: snapshot", nil, err)
	}
	s.mu.Lock()
	s.st.Snapshot = ref
	s.mu.Unlock()
	_ = s.saveState()
	return ref, nil
}

// Stop ends the sandbox's processes and cgroups but keeps the workspace
// and the state directory, so the session can be resumed (rebuilt).
func (s *session) Stop(ctx context.Context) error { return s.stop(nil) }

// stop is Stop; meanwhile, when not nil, runs after the init is sent
// its SIGKILL and, for an init this client started, before its death is
// waited for (for a resumed one, after).
func (s *session) stop(meanwhile func()) error {
	s.watches.End()
	s.mu.Lock()
	if s.root != nil {
		_ = s.root.Close()
		s.root = nil
	}
	s.mu.Unlock()
	s.stopEgress()
	// SIGKILL to the init, pid 1 of the session's pid namespace, kills
	// every process in it: no request to the init is needed first.
	if s.child != nil {
		s.child.signal()
		if meanwhile != nil {
			meanwhile()
		}
		s.child.wait()
	} else {
		killInit(s.h.InitPID, s.st.ID)
		if meanwhile != nil {
			meanwhile()
		}
	}
	if err := s.g.Remove(); err != nil {
		return sandbox.Wrap("linux: stop", nil, err)
	}
	return nil
}

// Close releases everything: processes, cgroups, the disk image and the
// workspace when the session made it, and the state directory.
func (s *session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	var errs []error
	// The directories only this session uses go while its init dies (the
	// teardown of its namespaces and mounts is the longest step of a
	// close); release, once it is dead, removes anything a dying command
	// wrote meanwhile, and the rest.
	if err := s.stop(func() { s.c.removeOwnDirs(s.st, s.h) }); err != nil {
		errs = append(errs, err)
	}
	if err := s.c.release(s.st, s.h); err != nil {
		errs = append(errs, err)
	} else {
		s.c.disown(s.st.ID)
	}
	return errors.Join(errs...)
}

// removeOwnDirs removes, as far as it can, the session directory and the
// workspace when the session made it, it is not a mounted disk image and
// no policy path is denied. It may run while the session's processes
// die, so what it leaves (and every error) is release's to retry and
// report. Threat: a file removed on the host loses the mask mounted over
// it in the session, and a command not yet killed could read a denied
// file in that moment; such a workspace waits for the processes' end.
func (c *Client) removeOwnDirs(st sandbox.State, h handles) {
	if st.OwnsWorkspace && st.Workspace != "" && !h.workspaceMounted() && len(st.Spec.Policy.Filesystem.Deny) == 0 {
		_ = os.RemoveAll(st.Workspace)
	}
	if dir := c.ownStateDir(h); dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// ownStateDir is st's session directory when it lies below the client's
// state directory (what release may remove), else "".
func (c *Client) ownStateDir(h handles) string {
	if dir := h.StateDir; dir != "" && strings.HasPrefix(dir, c.opts.StateDir+"/") {
		return dir
	}
	return ""
}

// release removes what a stopped session owns on the host.
func (c *Client) release(st sandbox.State, h handles) error {
	var errs []error
	defer c.slots.release(h.IDBase, h.StateDir)
	if err := removeMadeDirs(h.MadeDirs); err != nil {
		errs = append(errs, err)
	}
	if h.DiskImage != "" && st.Workspace != "" {
		unmountDisk(st.Workspace)
	}
	if h.WorkspaceTmpfs && st.OwnsWorkspace && st.Workspace != "" {
		if err := unix.Unmount(st.Workspace, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			errs = append(errs, fmt.Errorf("unmount the workspace's tmpfs %s: %w", st.Workspace, err))
		}
	}
	if st.OwnsWorkspace && st.Workspace != "" {
		if err := os.RemoveAll(st.Workspace); err != nil {
			errs = append(errs, fmt.Errorf("remove workspace %s: %w", st.Workspace, err))
		}
	}
	if dir := c.ownStateDir(h); dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove session directory %s: %w", dir, err))
		}
	}
	if len(errs) > 0 {
		return sandbox.Wrap("linux: close", nil, errors.Join(errs...))
	}
	return nil
}
