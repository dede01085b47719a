package agent

import (
	"context"
	"io/fs"
	"path"

	"github.com/agentbox/agentbox/sandbox"
)

// workdirSession makes RunConfig.Workdir the default directory of a
// session's tools: commands start there and relative file paths resolve
// against it. Everything else is the session itself.
type workdirSession struct {
	sandbox.Session
	dir string
}

func (w workdirSession) in(p string) string {
	if p == "" || path.IsAbs(p) {
		if p == "" {
			return w.dir
		}
		return p
	}
	return path.Join(w.dir, p)
}

func (w workdirSession) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	req.Workdir = w.in(req.Workdir)
	return w.Session.Start(ctx, req)
}

func (w workdirSession) ReadFile(ctx context.Context, p string) ([]byte, error) {
	return w.Session.ReadFile(ctx, w.in(p))
}

// ReadFileLimit keeps the session's bounded read (sandbox.LimitedReader)
// through the wrapper.
func (w workdirSession) ReadFileLimit(ctx context.Context, p string, max int64) ([]byte, error) {
	return sandbox.ReadFileLimit(ctx, w.Session, w.in(p), max)
}

func (w workdirSession) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	return w.Session.WriteFile(ctx, w.in(p), data, mode)
}

func (w workdirSession) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	return w.Session.ListDir(ctx, w.in(p))
}
