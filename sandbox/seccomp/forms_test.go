//go:build linux

package seccomp

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// verdict is what a system call gets: allowed, or refused with an errno.
type verdict struct {
	allowed bool
	errno   unix.Errno
}

// profileVerdict evaluates the profile the way libseccomp does: the rules
// naming the call whose argument conditions all hold decide (the profile
// never gives one call two different actions), else the default.
func profileVerdict(t *testing.T, prof profileJSON, name string, args [6]uint64) verdict {
	t.Helper()
	for _, r := range prof.Syscalls {
		if !slices.Contains(r.Names, name) || !conditionsHold(t, r.Args, args) {
			continue
		}
		switch {
		case r.Action == "SCMP_ACT_ALLOW":
			return verdict{allowed: true}
		case r.Action == "SCMP_ACT_ERRNO" && r.ErrnoRet != nil:
			return verdict{errno: unix.Errno(*r.ErrnoRet)}
		case r.Action == "SCMP_ACT_ERRNO":
			return verdict{errno: unix.EPERM}
		}
		t.Fatalf("rule for %s has unexpected action %s", name, r.Action)
	}
	if prof.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Fatalf("unexpected default action %s", prof.DefaultAction)
	}
	return verdict{errno: unix.EPERM}
}

func conditionsHold(t *testing.T, conds []profileArg, args [6]uint64) bool {
	t.Helper()
	for _, c := range conds {
		v := args[c.Index]
		switch c.Op {
		case "SCMP_CMP_EQ":
			if v != c.Value {
				return false
			}
		case "SCMP_CMP_MASKED_EQ":
			if v&c.Value != c.ValueTwo {
				return false
			}
		default:
			t.Fatalf("unexpected comparison %s", c.Op)
		}
	}
	return true
}

// filterVerdict runs the BPF program on a native call of a.
func filterVerdict(t *testing.T, prog []unix.SockFilter, a *arch, nr uint32, args [6]uint64) verdict {
	t.Helper()
	switch act := run(t, prog, seccompData{nr: nr, arch: a.audit, args: args}); act {
	case actAllow:
		return verdict{allowed: true}
	case actEPERM:
		return verdict{errno: unix.EPERM}
	case actENOSYS:
		return verdict{errno: unix.ENOSYS}
	default:
		t.Fatalf("native call %d: action %s", nr, actName(act))
	}
	return verdict{}
}

// forms compiles both forms of the policy for a.
func forms(t *testing.T, a *arch) ([]unix.SockFilter, profileJSON) {
	t.Helper()
	prog, err := a.filter()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := a.profile(nil)
	if err != nil {
		t.Fatal(err)
	}
	return prog, prof
}

func TestEveryCallThePolicyRefusesIsRefusedByTheFilterAndTheProfile(t *testing.T) {
	for _, a := range arches {
		t.Run(a.goarch, func(t *testing.T) {
			prog, prof := forms(t, &a)
			want := map[string]verdict{}
			for _, d := range a.denied() {
				want[d.name] = verdict{errno: unix.EPERM}
			}
			for _, c := range enosysCalls {
				want[c.name] = verdict{errno: unix.ENOSYS}
			}
			for name, v := range want {
				if got := profileVerdict(t, prof, name, [6]uint64{}); got != v {
					t.Errorf("profile: %s gets %+v, want %+v", name, got, v)
				}
				if got := filterVerdict(t, prog, &a, a.nr(name), [6]uint64{}); got != v {
					t.Errorf("filter: %s gets %+v, want %+v", name, got, v)
				}
			}
			if !slices.Equal(prof.Architectures, []string{a.scmp}) {
				t.Errorf("profile architectures %v, want %s only", prof.Architectures, a.scmp)
			}
		})
	}
}

// TestTheFilterAndTheProfileDecideEveryCallAlike tries every system call
// of each architecture's table with argument values that the argument
// rules look at, in every argument position, and compares the two forms.
// They differ in two documented ways only: calls newer than the reviewed
// one get ENOSYS from the filter and EPERM from the profile, and the
// profile does not refuse the ioctl requests in deniedIoctls.
func TestTheFilterAndTheProfileDecideEveryCallAlike(t *testing.T) {
	values := []uint64{
		unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
		unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWTIME, uint64(unix.SIGCHLD),
		unix.S_ISUID | 0o755, unix.S_ISGID | 0o755, 0o755,
		0x0040000, 0xffffffff, unix.TCGETS,
	}
	vectors := [][6]uint64{{}}
	for i := range 6 {
		for _, v := range values {
			var args [6]uint64
			args[i] = v
			vectors = append(vectors, args)
		}
	}
	for _, d := range deniedIoctls {
		vectors = append(vectors, [6]uint64{0, uint64(d.req)})
	}
	for _, a := range arches {
		t.Run(a.goarch, func(t *testing.T) {
			prog, prof := forms(t, &a)
			newest := a.nr(newestReviewed)
			for _, c := range a.calls {
				name, nr := c.name, c.nr
				for _, args := range vectors {
					f := filterVerdict(t, prog, &a, nr, args)
					p := profileVerdict(t, prof, name, args)
					switch {
					case nr > newest:
						if f.errno != unix.ENOSYS || p.errno != unix.EPERM {
							t.Errorf("%s (newer than %s) %x: filter %+v, profile %+v, want ENOSYS and EPERM", name, newestReviewed, args, f, p)
						}
					case name == "ioctl" && !f.allowed:
						if !slices.ContainsFunc(deniedIoctls, func(d ioctlRule) bool { return uint64(d.req) == args[1] }) {
							t.Errorf("the filter refuses ioctl %x, which is not in deniedIoctls", args)
						}
					case f != p:
						t.Errorf("%s %x: filter %+v, profile %+v", name, args, f, p)
					}
				}
			}
		})
	}
}
