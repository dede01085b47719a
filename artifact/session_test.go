package artifact

import (
	"context"
	"errors"
	"io"
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

func (h *hostSession) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	h.execs++
	cmd := exec.Command(req.Cmd[0], req.Cmd[1:]...)
	cmd.Dir = h.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &hostProcess{cmd: cmd}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if p.stderr, err = cmd.StderrPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if req.Stdin != nil {
		sandbox.FeedStdin(p, req.Stdin)
	}
	return p, nil
}

// hostProcess is a host command as a sandbox.Process.
type hostProcess struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr io.Reader
}

func (p *hostProcess) Stdin() io.WriteCloser                        { return p.stdin }
func (p *hostProcess) Stdout() io.Reader                            { return p.stdout }
func (p *hostProcess) Stderr() io.Reader                            { return p.stderr }
func (p *hostProcess) Resize(context.Context, uint16, uint16) error { return errors.New("not used") }
func (p *hostProcess) Kill(context.Context) error                   { return p.cmd.Process.Kill() }
func (p *hostProcess) Close() error                                 { _ = p.cmd.Process.Kill(); return nil }

func (p *hostProcess) Wait(context.Context) (sandbox.ExitStatus, error) {
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return sandbox.ExitStatus{ExitCode: ee.ExitCode()}, nil
	}
	return sandbox.ExitStatus{}, err
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
