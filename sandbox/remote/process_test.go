package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
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
	sandboxtest.KillUnreadOutput(t, sess)
}
