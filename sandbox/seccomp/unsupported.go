//go:build linux && !amd64 && !arm64

package seccomp

import (
	"runtime"

	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

func errArch() error {
	return sandbox.Errorf(sandbox.ErrUnavailable, "seccomp: no filter for architecture %s (only amd64 and arm64)", runtime.GOARCH)
}

// Filter reports that this architecture has no filter.
func Filter() ([]unix.SockFilter, error) { return nil, errArch() }

// Install reports that this architecture has no filter; the backend must
// refuse the identity policy part.
func Install() error { return errArch() }

// Denied is empty: nothing is blocked on this architecture.
func Denied() []string { return nil }
