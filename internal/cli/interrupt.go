package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// interruptible returns a context that SIGINT, SIGTERM and SIGHUP (the
// terminal gone) cancel, as signal.NotifyContext does, but subscribes in
// the background: the runtime hands each signal to its signal thread and
// waits for it, which costs ~0.4 ms of a cold start on a small VM. Until
// armed returns, the signals keep their default action (the process
// exits), so a caller calls armed before it makes anything an exit would
// leave behind (a temporary directory, a session). release releases ctx
// but leaves the subscription: undoing it (signal.Stop) is another
// hand-off to the signal thread, ~0.3 ms of every exec, and the process
// ends right after; a signal that comes between is caught and dropped.
func interruptible(parent context.Context) (ctx context.Context, armed, release func()) {
	ctx, cancel := context.WithCancel(parent)
	caught := make(chan os.Signal, 1)
	subscribed := make(chan struct{})
	go func() {
		signal.Notify(caught, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		close(subscribed)
		select {
		case <-caught:
			cancel()
		case <-ctx.Done():
		}
	}()
	armed = func() { <-subscribed }
	release = cancel
	return ctx, armed, release
}
