package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	cause := errors.New("boom")
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"op and cause", &Error{Op: "linux: exec", Kind: ErrTimeout, Err: cause}, "linux: exec: boom"},
		{"cause only", &Error{Kind: ErrTimeout, Err: cause}, "boom"},
		{"op and kind", &Error{Op: "docker: create", Kind: ErrUnavailable}, "docker: create: backend unavailable"},
		{"kind only", &Error{Kind: ErrNotFound}, "not found"},
		{"op only", &Error{Op: "local: stop"}, "local: stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorIsAndAs(t *testing.T) {
	pathErr := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	err := fmt.Errorf("reading config: %w", Wrap("local: read", ErrNotFound, pathErr))
	tests := []struct {
		name   string
		target error
		want   bool
	}{
		{"the kind is found", ErrNotFound, true},
		{"the cause is found", pathErr, true},
		{"the cause's own cause is found", fs.ErrNotExist, true},
		{"another kind is not found", ErrTimeout, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(err, tt.target); got != tt.want {
				t.Fatalf("errors.Is(%v, %v) = %v, want %v", err, tt.target, got, tt.want)
			}
		})
	}
	t.Run("As finds the sandbox error and the cause", func(t *testing.T) {
		var se *Error
		if !errors.As(err, &se) || se.Op != "local: read" {
			t.Fatalf("As *Error = %+v", se)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != "/x" {
			t.Fatalf("As *fs.PathError = %+v", pe)
		}
	})
	t.Run("Wrap of nil is nil", func(t *testing.T) {
		if Wrap("op", ErrInvalid, nil) != nil {
			t.Fatal("Wrap(nil) is not nil")
		}
	})
	t.Run("Errorf keeps a wrapped cause and sets the kind", func(t *testing.T) {
		e := Errorf(ErrInvalid, "state: %w", fs.ErrPermission)
		if !errors.Is(e, ErrInvalid) || !errors.Is(e, fs.ErrPermission) || e.Error() != "state: permission denied" {
			t.Fatalf("Errorf = %v", e)
		}
	})
}

func TestIsRetryable(t *testing.T) {
	retry := &Error{Op: "docker: exec", Kind: ErrUnavailable, Err: errors.New("engine restarting"), Retryable: true}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil is not retryable", nil, false},
		{"a plain error is not retryable", errors.New("connection refused"), false},
		{"an error marked retryable is", retry, true},
		{"a retryable error wrapped by fmt is", fmt.Errorf("create: %w", retry), true},
		{"a retryable cause under a non-retryable error is", &Error{Op: "remote: create", Err: retry}, true},
		{"an unmarked sandbox error is not, even if its kind sounds transient", &Error{Kind: ErrUnavailable, Err: errors.New("try later")}, false},
		{"an error whose message says retry is not", errors.New("temporary failure, please retry"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsRetryable(tt.err); got != tt.want {
				t.Fatalf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
