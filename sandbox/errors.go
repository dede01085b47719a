package sandbox

import (
	"errors"
	"fmt"
)

// Error kinds. Test with errors.Is; every error a backend returns wraps one
// of these when it fits, plus its cause.
var (
	// ErrPolicyUnsupported: the backend cannot enforce a requested part.
	ErrPolicyUnsupported = errors.New("policy not supported")
	// ErrTimeout: a command or session exceeded its wall-clock limit.
	ErrTimeout = errors.New("timed out")
	// ErrOutputLimit: output exceeded its cap.
	ErrOutputLimit = errors.New("output limit exceeded")
	// ErrNotFound: a session, file or snapshot does not exist.
	ErrNotFound = errors.New("not found")
	// ErrPathEscape: a path would leave the workspace or sandbox root.
	ErrPathEscape = errors.New("path escapes the sandbox")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrClosed: the session was closed.
	ErrClosed = errors.New("session closed")
	// ErrGone: the sandbox a State describes no longer runs (it was
	// stopped, it crashed, the host rebooted); Client.Rebuild makes a new
	// session from what it left.
	ErrGone = errors.New("sandbox gone")
	// ErrUnavailable: the backend (engine, kernel feature, server) cannot
	// be reached or is not present on this host.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrUnsupported: the backend has no way to do what was asked (a
	// verb of an optional interface such as Pauser); the cause says why.
	ErrUnsupported = errors.New("not supported by this backend")
	// ErrPaused: the session is paused; unpause it to run commands.
	ErrPaused = errors.New("session paused")
)

// Error is a sandbox error: what was being done, its kind, its cause, and
// whether retrying the same call may succeed.
type Error struct {
	// Op is what was being done ("linux: exec", "docker: create").
	Op string
	// Kind is one of the Err* kinds above, or nil.
	Kind error
	// Err is the underlying cause.
	Err error
	// Retryable is set by the backend that knows; it is never guessed.
	Retryable bool
}

func (e *Error) Error() string {
	switch {
	case e.Op != "" && e.Err != nil:
		return e.Op + ": " + e.Err.Error()
	case e.Err != nil:
		return e.Err.Error()
	case e.Op != "" && e.Kind != nil:
		return e.Op + ": " + e.Kind.Error()
	case e.Kind != nil:
		return e.Kind.Error()
	}
	return e.Op
}

// Unwrap exposes both the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Errorf builds an *Error of the given kind with a formatted cause.
func Errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// Wrap annotates err with an operation and a kind; nil stays nil.
func Wrap(op string, kind error, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Op: op, Kind: kind, Err: err}
}

// IsRetryable reports whether some *Error in err's chain says retrying may
// succeed.
func IsRetryable(err error) bool {
	var e *Error
	for err != nil {
		if errors.As(err, &e) {
			if e.Retryable {
				return true
			}
			err = e.Err
			continue
		}
		return false
	}
	return false
}
