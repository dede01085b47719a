package sandboxtest

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// KillUnreadOutput checks, in sess, that a command whose output nobody
// reads, which fills every buffer on its way and blocks in a write, is
// killed and waited for promptly, on stdout and on stderr: neither Kill
// nor the news of the end may queue behind that output, and what was
// taken meanwhile is still there, in order, for a late reader. For the
// backends whose output shares a connection with that news (docker's
// attach stream, the server's WebSocket); not part of Run, since not
// every backend's tests run it yet.
func KillUnreadOutput(t *testing.T, sess sandbox.Session) {
	for _, stream := range []string{"stdout", "stderr"} {
		t.Run("on "+stream, func(t *testing.T) {
			redirect := ""
			if stream == "stderr" {
				redirect = " >&2"
			}
			p, err := sess.Start(ctx(t), sandbox.ExecRequest{Cmd: []string{"sh", "-c", "exec head -c 268435456 /dev/zero" + redirect}, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			time.Sleep(time.Second) // the buffers fill and the command blocks
			start := time.Now()
			kctx, cancel := context.WithTimeout(ctx(t), 30*time.Second)
			defer cancel()
			if err := p.Kill(kctx); err != nil {
				t.Fatalf("kill after %s: %v", time.Since(start).Round(time.Millisecond), err)
			}
			st, err := p.Wait(kctx)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("wait after %s: %v", took.Round(time.Millisecond), err)
			}
			if st.ExitCode != 137 && st.Signal != "SIGKILL" {
				t.Fatalf("the killed command ended %+v; want it killed", st)
			}
			if took > 15*time.Second {
				t.Fatalf("kill and wait took %s", took.Round(time.Millisecond))
			}
			r := p.Stdout()
			if stream == "stderr" {
				r = p.Stderr()
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatalf("read %s after the exit: %v", stream, err)
			}
			nonzero := bytes.ContainsFunc(got, func(r rune) bool { return r != 0 })
			if len(got) < 1<<20 || len(got) >= 256<<20 || nonzero {
				t.Fatalf("%s read after the exit: %d bytes (nonzero ones among them: %t); want the MiBs taken before the kill, all zeros", stream, len(got), nonzero)
			}
		})
	}
}
