//go:build linux

package seccomp

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// seccompData mirrors struct seccomp_data for the interpreter.
type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

func (d seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], d.nr)
	binary.LittleEndian.PutUint32(b[4:], d.arch)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// run interprets the subset of classic BPF that Filter emits, the way the
// kernel does for seccomp, and returns the action. Any other opcode is a
// test failure, so a change to the emitter cannot go unexercised.
func run(t *testing.T, prog []unix.SockFilter, d seccompData) uint32 {
	t.Helper()
	data := d.bytes()
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if in.K%4 != 0 || int(in.K)+4 > len(data) {
				t.Fatalf("instruction %d loads bad offset %d", pc, in.K)
			}
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			pc += jumpOff(acc == in.K, in)
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			pc += jumpOff(acc >= in.K, in)
		case unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K:
			pc += jumpOff(acc > in.K, in)
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			pc += jumpOff(acc&in.K != 0, in)
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d has unexpected opcode %#x", pc, in.Code)
		}
	}
	t.Fatalf("program ran off its end")
	return 0
}

func jumpOff(cond bool, in unix.SockFilter) int {
	if cond {
		return int(in.Jt)
	}
	return int(in.Jf)
}

func actName(a uint32) string {
	switch a {
	case actAllow:
		return "allow"
	case actEPERM:
		return "EPERM"
	case actENOSYS:
		return "ENOSYS"
	case actKill:
		return "kill"
	}
	return fmt.Sprintf("%#x", a)
}

// TestFilterDecisions checks the filter for the architecture the test
// runs on against x/sys's numbers for it, independently of the generated
// table.
func TestFilterDecisions(t *testing.T) {
	a, err := nativeArch()
	if err != nil {
		testenv.Skipf(t, "%v", err)
	}
	prog, err := Filter()
	if err != nil {
		t.Fatal(err)
	}
	maxReviewed := uint32(unix.SYS_FILE_SETATTR)
	native := func(nr uint32, args ...uint64) seccompData {
		d := seccompData{nr: nr, arch: a.audit}
		copy(d.args[:], args)
		return d
	}
	tests := []struct {
		name string
		data seccompData
		want uint32
	}{
		{"getpid is allowed", native(unix.SYS_GETPID), actAllow},
		{"read is allowed", native(unix.SYS_READ), actAllow},
		{"a call from a foreign architecture kills the process", seccompData{nr: unix.SYS_GETPID, arch: unix.AUDIT_ARCH_I386}, actKill},
		{"a call newer than the reviewed list is ENOSYS", native(maxReviewed + 1), actENOSYS},
		{"the newest reviewed call is allowed", native(maxReviewed), actAllow},
		{"clone3 is ENOSYS so libc falls back to clone", native(unix.SYS_CLONE3), actENOSYS},
		{"clone for a thread is allowed", native(unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD|unix.CLONE_SYSVSEM), actAllow},
		{"clone for fork is allowed", native(unix.SYS_CLONE, uint64(unix.SIGCHLD)), actAllow},
		{"clone with CLONE_NEWUSER is denied", native(unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), actEPERM},
		{"clone with CLONE_NEWNET is denied", native(unix.SYS_CLONE, unix.CLONE_NEWNET), actEPERM},
		{"clone with CLONE_NEWNS is denied", native(unix.SYS_CLONE, unix.CLONE_NEWNS), actEPERM},
		{"clone with CLONE_NEWPID is denied", native(unix.SYS_CLONE, unix.CLONE_NEWPID), actEPERM},
		{"clone with high garbage bits only is allowed (kernel ignores them)", native(unix.SYS_CLONE, 1<<40|uint64(unix.SIGCHLD)), actAllow},
		{"unshare of files is allowed", native(unix.SYS_UNSHARE, unix.CLONE_FILES), actAllow},
		{"unshare with CLONE_NEWUSER is denied", native(unix.SYS_UNSHARE, unix.CLONE_NEWUSER), actEPERM},
		{"unshare with CLONE_NEWTIME is denied", native(unix.SYS_UNSHARE, unix.CLONE_NEWTIME), actEPERM},
		{"unshare with CLONE_NEWCGROUP is denied", native(unix.SYS_UNSHARE, unix.CLONE_NEWCGROUP), actEPERM},
		{"personality PER_LINUX is allowed", native(unix.SYS_PERSONALITY, 0), actAllow},
		{"personality query is allowed", native(unix.SYS_PERSONALITY, 0xffffffff), actAllow},
		{"personality ADDR_NO_RANDOMIZE is denied", native(unix.SYS_PERSONALITY, 0x0040000), actEPERM},
		{"ioctl TCGETS is allowed", native(unix.SYS_IOCTL, 0, unix.TCGETS), actAllow},
		{"ioctl TIOCSTI is denied", native(unix.SYS_IOCTL, 0, unix.TIOCSTI), actEPERM},
		{"ioctl TIOCLINUX is denied", native(unix.SYS_IOCTL, 0, unix.TIOCLINUX), actEPERM},
	}
	if a.x32 {
		tests = append(tests, struct {
			name string
			data seccompData
			want uint32
		}{"an x32 call is denied", native(x32Bit | unix.SYS_GETPID), actEPERM})
	}
	for _, d := range a.denied() {
		tests = append(tests, struct {
			name string
			data seccompData
			want uint32
		}{d.name + " is denied", native(a.nr(d.name)), actEPERM})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, prog, tt.data); got != tt.want {
				t.Errorf("action = %s, want %s", actName(got), actName(tt.want))
			}
		})
	}
}

func TestDeniedNamesEveryRule(t *testing.T) {
	a, err := nativeArch()
	if err != nil {
		testenv.Skipf(t, "%v", err)
	}
	denied := map[string]bool{}
	for _, d := range Denied() {
		denied[d] = true
	}
	for _, r := range a.denied() {
		if !denied[r.name] {
			t.Errorf("Denied() lacks %s", r.name)
		}
		if r.threat == "" {
			t.Errorf("rule %s does not say what threat it stops", r.name)
		}
	}
}

func TestRulesHaveNoDuplicateNumbers(t *testing.T) {
	for _, a := range arches {
		seen := map[uint32]string{}
		for _, d := range a.denied() {
			nr := a.nr(d.name)
			if other, dup := seen[nr]; dup {
				t.Errorf("%s: %s and %s share number %d", a.goarch, d.name, other, nr)
			}
			seen[nr] = d.name
		}
	}
}
