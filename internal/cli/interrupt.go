package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// errInterrupted is the cause of a context that interruptible cancelled.
var errInterrupted = errors.New("interrupted")

// ExitInterrupted is the status agentbox exits with when a signal (Ctrl-C,
// SIGTERM, the terminal gone) ended it, as a shell reports SIGINT.
const ExitInterrupted = 130

// interruptible returns a context that SIGINT, SIGTERM and SIGHUP (the
// terminal gone) cancel with errInterrupted, so that what a command made
// (a temporary directory, a session) is undone on the way out instead of
// being left behind by the signal's default action.
func interruptible(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		select {
		case <-caught:
			cancel(errInterrupted)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(caught)
		cancel(nil)
	}
}

// failed is err as agentbox's exit: 130 when ctx was interrupted (the
// command was ended because agentbox was), else 125.
func failed(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errInterrupted) {
		return &ExitError{Code: ExitInterrupted, Err: err}
	}
	return Fail(err)
}
