package artifact

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// hostSession is a test stand-in for a live session whose sandbox paths
// are the host paths of its workspace (Workdir = the host dir), so that
// validate commands and stat(1) run for real without a backend.
type hostSession struct {
	dir    string
	execs  int
	closed bool
}

func (h *hostSession) ID() string { return "test" }

func (h *hostSession) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	h.execs++
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, req.Cmd[0], req.Cmd[1:]...)
	cmd.Dir = h.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := sandbox.ExecResult{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.ExitCode = ee.ExitCode()
		res.TimedOut = ctx.Err() != nil
		return res, nil
	}
	return res, err
}

func (h *hostSession) Start(context.Context, sandbox.ExecRequest) (sandbox.Process, error) {
	return nil, errors.New("not used")
}

func (h *hostSession) ReadFile(_ context.Context, p string) ([]byte, error) {
	rel, err := sandbox.ResolveWorkspacePath(h.dir, p)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(h.dir, filepath.FromSlash(rel)))
}

// WriteFile writes p, relative to the workspace or absolute under it, as
// a backend does (parent directories included).
func (h *hostSession) WriteFile(_ context.Context, p string, data []byte, mode fs.FileMode) error {
	rel, err := sandbox.ResolveWorkspacePath(h.dir, p)
	if err != nil {
		return err
	}
	full := filepath.Join(h.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	return os.WriteFile(full, data, mode)
}

func (h *hostSession) ListDir(_ context.Context, p string) ([]sandbox.FileInfo, error) {
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var out []sandbox.FileInfo
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		info := sandbox.FileInfo{Name: e.Name(), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime(), IsDir: fi.IsDir()}
		if fi.Mode()&fs.ModeSymlink != 0 {
			info.Target, _ = os.Readlink(filepath.Join(p, e.Name()))
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (h *hostSession) Snapshot(context.Context) (string, error) { return "", errors.New("not used") }

func (h *hostSession) State() sandbox.State {
	return sandbox.State{Version: sandbox.StateVersion, Backend: "test", ID: "test", Spec: sandbox.Spec{Workdir: h.dir}, CreatedAt: time.Unix(0, 0)}
}

func (h *hostSession) Stop(context.Context) error  { return nil }
func (h *hostSession) Close(context.Context) error { h.closed = true; return nil }

// freshSessions is a PromoteOptions.NewSession of host sessions, each on
// a new directory; it keeps what it made.
type freshSessions struct {
	t       *testing.T
	made    []*hostSession
	prepare func(*hostSession) sandbox.Session // nil: the host session itself
}

func (f *freshSessions) new(context.Context) (sandbox.Session, error) {
	h := &hostSession{dir: f.t.TempDir()}
	f.made = append(f.made, h)
	if f.prepare != nil {
		return f.prepare(h), nil
	}
	return h, nil
}
