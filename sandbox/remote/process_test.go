package remote_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// TestKillAndWaitDoNotQueueBehindUnreadOutput: a command whose output
// nobody reads fills every buffer between it and the client and blocks in
// a write; the answer to Kill and the exit travel on the same connection,
// behind that output, and must arrive all the same. What was taken in the
// meantime is still there, in order, for a late reader.
func TestKillAndWaitDoNotQueueBehindUnreadOutput(t *testing.T) {
	sv := serve(t, linuxBackend(t))
	c := sv.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess, err := c.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	for _, stream := range []string{"stdout", "stderr"} {
		t.Run("on "+stream, func(t *testing.T) {
			redirect := ""
			if stream == "stderr" {
				redirect = " >&2"
			}
			p, err := sess.Start(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "exec head -c 268435456 /dev/zero" + redirect}, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			time.Sleep(time.Second) // the buffers fill and the command blocks
			start := time.Now()
			kctx, cancel := context.WithTimeout(ctx, 20*time.Second)
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
			if took > 10*time.Second {
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
			if len(got) < 1<<20 || len(got) >= 256<<20 || bytes.ContainsFunc(got, func(r rune) bool { return r != 0 }) {
				t.Fatalf("%s read after the exit: %d bytes (nonzero ones included: %t); want the MiBs taken before the kill, all zeros", stream, len(got), bytes.ContainsFunc(got, func(r rune) bool { return r != 0 }))
			}
		})
	}
}
