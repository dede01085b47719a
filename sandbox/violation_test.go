package sandbox

import "testing"

// The OOM violation names the limit as a person set it (--memory 64M),
// not as a count of bytes.
func TestOOMViolationNamesTheLimitReadably(t *testing.T) {
	for limit, want := range map[int64]string{
		64 << 20: "memory limit of 64.0 MiB reached: the kernel's OOM killer ended a process",
		1 << 30:  "memory limit of 1.0 GiB reached: the kernel's OOM killer ended a process",
		0:        "memory limit reached: the kernel's OOM killer ended a process",
	} {
		if got := OOMViolation(limit); got != want {
			t.Errorf("OOMViolation(%d) = %q, want %q", limit, got, want)
		}
	}
}
