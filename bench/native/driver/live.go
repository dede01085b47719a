package main

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// liveResult compares an Exec in a live session with a bare fork/exec.
type liveResult struct {
	bare, exec series
}

// runLive alternates a bare os/exec of /bin/true with a Session.Exec of
// it, so that both see the same machine load.
func runLive(ctx context.Context, n int, s sandbox.Session) (*liveResult, error) {
	r := &liveResult{bare: series{name: "os/exec /bin/true"}, exec: series{name: "Session.Exec /bin/true"}}
	req := sandbox.ExecRequest{Cmd: []string{"/bin/true"}}
	for i := 0; i < n+n/10; i++ {
		t := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			return nil, fmt.Errorf("bare /bin/true: %w", err)
		}
		bare := time.Since(t)
		t = time.Now()
		res, err := sandbox.Exec(ctx, s, req)
		d := time.Since(t)
		if err != nil {
			return nil, fmt.Errorf("exec /bin/true in session %s: %w", s.ID(), err)
		}
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("exec /bin/true in session %s: exit %d", s.ID(), res.ExitCode)
		}
		if i < n/10 {
			continue // warm-up
		}
		r.bare.add(bare)
		r.exec.add(d)
	}
	return r, nil
}
