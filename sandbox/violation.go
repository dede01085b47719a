package sandbox

import (
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/bytesize"
)

// The lines of ExitStatus.Violations, worded the same by every backend so
// that a reader (a person, an audit trail, a test) can rely on them.

// ExecTimeoutViolation: a command passed its timeout and its process
// tree was killed.
func ExecTimeoutViolation(d time.Duration) string {
	return fmt.Sprintf("exec timeout of %s reached: the process tree was killed", d)
}

// SessionTimeoutViolation: the session passed its timeout and ended,
// with every process in it.
func SessionTimeoutViolation(d time.Duration) string {
	return fmt.Sprintf("session timeout of %s reached: the session was ended", d)
}

// OOMViolation: the kernel's OOM killer ended a process of a session
// whose memory limit is limit bytes (0 when the backend cannot say).
func OOMViolation(limit int64) string {
	if limit <= 0 {
		return "memory limit reached: the kernel's OOM killer ended a process"
	}
	return fmt.Sprintf("memory limit of %s reached: the kernel's OOM killer ended a process", bytesize.Format(limit))
}

// EgressViolation: the egress proxy refused a connection or request;
// detail says which and why (METHOD "HOST": REASON).
func EgressViolation(detail string) string { return "egress refused: " + detail }
