//go:build linux

package seccomp

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

func probeResults(t *testing.T, filter bool) map[string]unix.Errno {
	t.Helper()
	var raw map[string]int
	if err := json.Unmarshal([]byte(child(t, "probe", filter)), &raw); err != nil {
		t.Fatalf("decode probe results: %v", err)
	}
	res := map[string]unix.Errno{}
	for k, v := range raw {
		res[k] = unix.Errno(v)
	}
	return res
}

func TestDeniedSyscallsFailUnderTheFilter(t *testing.T) {
	got := probeResults(t, true)
	for _, p := range probes() {
		t.Run(p.name, func(t *testing.T) {
			if errno, ok := got[p.name]; !ok {
				t.Fatal("the child did not report this probe")
			} else if errno != p.want {
				t.Errorf("errno = %v (%d), want %v (%d)", errno, errno, p.want, p.want)
			}
		})
	}
}

// TestDeniedSyscallsAreNotEPERMWithoutTheFilter is the control: as root,
// each probe's arguments make the kernel fail it some other way, so the
// EPERM seen under the filter is the filter's doing, not the kernel's.
func TestDeniedSyscallsAreNotEPERMWithoutTheFilter(t *testing.T) {
	testenv.NeedRoot(t, "the control run (unprivileged, the kernel itself answers EPERM to most probes)")
	got := probeResults(t, false)
	for _, p := range probes() {
		if p.noControl || p.want != unix.EPERM {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			if got[p.name] == unix.EPERM {
				t.Errorf("unfiltered the kernel already answers EPERM, so the filtered test proves nothing")
			}
		})
	}
}

func TestOrdinaryProgramsWorkUnderTheFilter(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"a shell pipeline runs", []string{"/bin/sh", "-c", "echo hi | cat"}, "hi\n"},
		{"ls lists a directory", []string{"ls", "/"}, "proc"},
		{"a subshell forks and waits", []string{"/bin/sh", "-c", "(exit 3); echo $?"}, "3\n"},
	}
	// The system python first: version-manager shims (pyenv) are slow
	// shell scripts. Both programs are always tried: one that is not
	// installed is a skip (a failure in CI), not a case left out.
	py := "python3"
	if _, err := exec.LookPath("/usr/bin/python3"); err == nil {
		py = "/usr/bin/python3"
	}
	tests = append(tests, struct {
		name string
		argv []string
		want string
	}{"python starts threads (glibc falls back from clone3)", []string{py, "-c",
		"import threading; ts=[threading.Thread(target=lambda: None) for _ in range(4)]; [t.start() for t in ts]; [t.join() for t in ts]; print('ok')"}, "ok\n"},
		struct {
			name string
			argv []string
			want string
		}{"git runs", []string{"git", "--version"}, "git version"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testenv.NeedCommand(t, tt.argv[0])
			out := child(t, "exec", true, tt.argv...)
			if !strings.Contains(out, tt.want) {
				t.Errorf("output %q does not contain %q", out, tt.want)
			}
		})
	}
}

func TestGoOsExecStillStartsProgramsAfterInstall(t *testing.T) {
	out := child(t, "osexec", true, "/bin/sh", "-c", "echo started")
	if out != "started\n" {
		t.Errorf("output %q", out)
	}
}

func TestInstallFiltersTheCallingThreadOnly(t *testing.T) {
	out := child(t, "threads", true)
	if !strings.HasPrefix(out, "only the calling thread is filtered") {
		t.Errorf("unexpected child output %q", out)
	}
}

func TestTheFilterIsInheritedAcrossExec(t *testing.T) {
	out := child(t, "exec", true, "/bin/sh", "-c", "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status")
	if !strings.Contains(out, "Seccomp:\t2") || !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Errorf("exec'd program's status lacks filter mode and no_new_privs:\n%s", out)
	}
}
