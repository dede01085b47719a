package testenv

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder stands for a test: it records Fatalf and Skipf instead of
// ending the goroutine.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
}

func TestAMissingRequirementSkipsOutsideCIAndFailsInCI(t *testing.T) {
	needs := []struct {
		name string
		call func(t testing.TB)
		want string
	}{
		{"Skipf", func(t testing.TB) { Skipf(t, "no %s here", "loop device") }, "no loop device here"},
		{"NeedDocker", func(t testing.TB) { NeedDocker(t, errors.New("dial unix: no such file")) }, "no Docker engine answers: dial unix: no such file"},
		{"NeedKernel", func(t testing.TB) { NeedKernel(t, "openat2", errors.New("ENOSYS")) }, "the kernel here has no openat2: ENOSYS"},
		{"NeedCommand", func(t testing.TB) { NeedCommand(t, "agentbox-no-such-program") }, "agentbox-no-such-program is not installed"},
	}
	for _, tt := range needs {
		t.Run(tt.name+" skips with the reason when CI is not set", func(t *testing.T) {
			t.Setenv("CI", "")
			r := &recorder{TB: t}
			tt.call(r)
			if r.skip != tt.want || r.fatal != "" {
				t.Errorf("skip %q, fatal %q; want skip %q", r.skip, r.fatal, tt.want)
			}
		})
		t.Run(tt.name+" fails with the reason when CI=true", func(t *testing.T) {
			t.Setenv("CI", "true")
			r := &recorder{TB: t}
			tt.call(r)
			if !strings.HasPrefix(r.fatal, "CI=true") || !strings.HasSuffix(r.fatal, tt.want) || r.skip != "" {
				t.Errorf("fatal %q, skip %q; want a failure ending in %q", r.fatal, r.skip, tt.want)
			}
		})
	}
}

func TestAMetRequirementNeitherSkipsNorFails(t *testing.T) {
	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	NeedDocker(r, nil)
	NeedKernel(r, "openat2", nil)
	if p := NeedCommand(r, "sh"); p == "" {
		t.Error("NeedCommand(sh) returned no path")
	}
	if r.fatal != "" || r.skip != "" {
		t.Errorf("fatal %q, skip %q; want neither", r.fatal, r.skip)
	}
}
