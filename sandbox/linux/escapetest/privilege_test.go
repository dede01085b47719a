package escapetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

func TestACommandHoldsNoPrivilege(t *testing.T) {
	want := []struct{ name, line string }{
		{"no effective capabilities", "CapEff:\t0000000000000000"},
		{"no permitted capabilities", "CapPrm:\t0000000000000000"},
		{"no inheritable capabilities", "CapInh:\t0000000000000000"},
		{"an empty bounding set", "CapBnd:\t0000000000000000"},
		{"no ambient capabilities", "CapAmb:\t0000000000000000"},
		{"no_new_privs is set", "NoNewPrivs:\t1"},
		{"a seccomp filter is installed", "Seccomp:\t2"},
	}
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			r := sh(t, who.s, "cat /proc/self/status")
			for _, w := range want {
				t.Run(w.name, func(t *testing.T) {
					if !strings.Contains(string(r.Stdout), w.line+"\n") {
						t.Errorf("/proc/self/status lacks %q:\n%s", w.line, r.Stdout)
					}
				})
			}
		})
	}
	t.Run("the default user is not root", func(t *testing.T) {
		if r := sh(t, shared(t), "id -u"); strings.TrimSpace(string(r.Stdout)) != "1000" {
			t.Errorf("id -u = %q, want 1000", r.Stdout)
		}
	})
}

func TestASetuidBinaryGainsNothing(t *testing.T) {
	s := shared(t)
	ws := s.State().Workspace
	copyHelper := func(t *testing.T, name string) string {
		t.Helper()
		b, err := os.ReadFile(hostHelper)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 0, 0); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("a setuid-root copy of the helper planted in the workspace", func(t *testing.T) {
		p := copyHelper(t, "suid-attack")
		if err := os.Chmod(p, os.ModeSetuid|0o755); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(p); fi.Mode()&os.ModeSetuid == 0 {
			t.Fatal("the setuid bit did not stick on the host")
		}
		r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{"/workspace/suid-attack", "ids"}})
		got, out := parseResult(t, []string{"ids"}, r)
		if got == "ok" || !strings.Contains(out, "euid=1000") {
			t.Fatalf("ESCAPE: the setuid-root binary ran with a new identity:\n%s", out)
		}
		if !strings.Contains(out, "CapEff:\t0000000000000000") {
			t.Errorf("the setuid binary holds capabilities:\n%s", out)
		}
	})
	t.Run("a copy of the helper with file capabilities (cap_net_raw+ep)", func(t *testing.T) {
		p := copyHelper(t, "fcap-attack")
		// struct vfs_cap_data, revision 2, effective, permitted = CAP_NET_RAW.
		xattr := make([]byte, 20)
		binary.LittleEndian.PutUint32(xattr[0:], 0x02000000|1)
		binary.LittleEndian.PutUint32(xattr[4:], 1<<unix.CAP_NET_RAW)
		if err := unix.Setxattr(p, "security.capability", xattr, 0); err != nil {
			t.Skipf("the host filesystem of the workspace takes no file capabilities: %v", err)
		}
		mustFailAt(t, s, "/workspace/fcap-attack", []string{"EPERM"}, "raw-socket")
		r := execIn(t, s, sandbox.ExecRequest{Cmd: []string{"/workspace/fcap-attack", "ids"}})
		if !strings.Contains(string(r.Stdout), "CapEff:\t0000000000000000") {
			t.Errorf("the file-capability binary holds capabilities:\n%s", r.Stdout)
		}
	})
	t.Run("the host's setuid-root su", func(t *testing.T) {
		if fi, err := os.Stat("/usr/bin/su"); err != nil || fi.Mode()&os.ModeSetuid == 0 {
			t.Skip("the host has no setuid-root /usr/bin/su")
		}
		// su waits for a password on its terminal; meanwhile its
		// credentials show whether the setuid bit took effect.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		p, err := s.Start(ctx, sandbox.ExecRequest{Cmd: []string{"su", "root", "-c", "id"}, TTY: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Kill(ctx)
		go io.Copy(io.Discard, p.Stdout())
		var uids string
		for i := 0; i < 100 && uids == ""; i++ {
			time.Sleep(20 * time.Millisecond)
			r := sh(t, s, `for f in /proc/[0-9]*/status; do grep -q '^Name:	su$' $f && grep '^Uid:' $f; done`)
			uids = strings.TrimSpace(string(r.Stdout))
		}
		if uids == "" {
			t.Fatal("su never showed up in /proc")
		}
		if f := strings.Fields(uids); len(f) != 5 || f[2] != "1000" || f[3] != "1000" {
			t.Fatalf("ESCAPE: su runs with uids %q (real, effective, saved, fs), want all 1000", uids)
		}
		t.Logf("su runs as %q", uids)
	})
}

// mustFailAt is mustFail with another copy of the helper.
func mustFailAt(t *testing.T, s sandbox.Session, bin string, want []string, args ...string) {
	t.Helper()
	r := execIn(t, s, sandbox.ExecRequest{Cmd: append([]string{bin}, args...)})
	got, out := parseResult(t, args, r)
	if got == "ok" {
		t.Fatalf("ESCAPE: %s %q succeeded:\n%s", bin, args, out)
	}
	if !contains(want, got) {
		t.Errorf("%s %q failed with %s, want %s", bin, args, got, strings.Join(want, " or "))
	}
}

func TestMountingFails(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			if r := sh(t, who.s, "mkdir -p /tmp/m/old"); r.ExitCode != 0 {
				t.Fatal(string(r.Stderr))
			}
			cases := []struct {
				name string
				args []string
			}{
				{"mounting a tmpfs", []string{"mount-tmpfs", "/tmp/m"}},
				{"binding the root elsewhere", []string{"mount-bind", "/", "/tmp/m"}},
				{"remounting the root read-write", []string{"remount-rw", "/"}},
				{"unmounting /proc", []string{"umount", "/proc"}},
				{"unmounting the workspace", []string{"umount", "/workspace"}},
				{"pivot_root", []string{"pivot-root", "/tmp/m", "/tmp/m/old"}},
				{"chroot", []string{"chroot", "/tmp/m"}},
				{"fsopen (the new mount API)", []string{"fsopen"}},
				{"open_tree of the workspace", []string{"open-tree", "/workspace"}},
				{"mount_setattr to clear read-only on /usr", []string{"mount-setattr-rw", "/usr"}},
			}
			var list [][]string
			for _, c := range cases {
				list = append(list, c.args)
			}
			results := batch(t, who.s, list)
			for i, c := range cases {
				t.Run(c.name+" fails", func(t *testing.T) {
					results[i].failed(t, "EPERM")
				})
			}
			t.Run("mount(8) fails", func(t *testing.T) {
				r := sh(t, who.s, "mount -t tmpfs none /tmp/m")
				if r.ExitCode == 0 {
					t.Fatal("ESCAPE: mount(8) mounted a tmpfs")
				}
			})
		})
	}
}

func TestCreatingAUserNamespaceFails(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			cases := []struct {
				name string
				want []string
				args []string
			}{
				{"unshare(CLONE_NEWUSER)", []string{"EPERM"}, []string{"unshare", "user"}},
				{"clone(CLONE_NEWUSER)", []string{"EPERM"}, []string{"clone-ns", "user"}},
				{"setns into the init's mount namespace", []string{"EPERM", "EACCES"}, []string{"setns", "/proc/1/ns/mnt"}},
				{"setns into its own user namespace", []string{"EPERM"}, []string{"setns", "/proc/self/ns/user"}},
			}
			for _, ns := range []string{"mount", "net", "pid", "ipc", "uts", "cgroup"} {
				cases = append(cases, struct {
					name string
					want []string
					args []string
				}{"unshare of a " + ns + " namespace", []string{"EPERM"}, []string{"unshare", ns}})
			}
			var list [][]string
			for _, c := range cases {
				list = append(list, c.args)
			}
			// One process for all: should one succeed, the test fails on
			// it, whatever it changed for the next ones.
			results := batch(t, who.s, list)
			for i, c := range cases {
				t.Run(c.name+" fails", func(t *testing.T) { results[i].failed(t, c.want...) })
			}
			tools := []string{"unshare -U true", "unshare -r true", "unshare -U -m -n -p -f true"}
			rs := shBatch(t, who.s, tools)
			for i, tool := range tools {
				t.Run(tool+" fails", func(t *testing.T) {
					if rs[i].code == 0 {
						t.Fatalf("ESCAPE: %q succeeded", tool)
					}
					t.Logf("exit %d: %s", rs[i].code, rs[i].out)
				})
			}
		})
	}
}

func TestInjectingTerminalInputWithTIOCSTIFails(t *testing.T) {
	s := shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := s.Start(ctx, sandbox.ExecRequest{Cmd: []string{helper, "tiocsti"}, TTY: true})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	st, err := p.Wait(ctx)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("wait: %v, exit %d: %q", err, st.ExitCode, out)
	}
	m := regexp.MustCompile(`result: (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no result in %q", out)
	}
	switch got := string(m[1]); got {
	case "ok":
		t.Fatalf("ESCAPE: TIOCSTI pushed input into the terminal: %q", out)
	case "EPERM":
		t.Log("stopped by the seccomp filter (EPERM)")
	case "EIO":
		t.Log("stopped by the kernel (dev.tty.legacy_tiocsti=0: EIO)")
	default:
		t.Errorf("TIOCSTI failed with %s, want EPERM or EIO", got)
	}
}

func TestUsingTheKernelKeyringFails(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			t.Run("keyctl", func(t *testing.T) { mustFail(t, who.s, []string{"EPERM"}, "keyctl") })
			t.Run("add_key", func(t *testing.T) { mustFail(t, who.s, []string{"EPERM"}, "add-key") })
		})
	}
}

func TestLoadingABPFProgramFails(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) { mustFail(t, who.s, []string{"EPERM"}, "bpf") })
	}
}

func TestSettingUpIOUringFails(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) { mustFail(t, who.s, []string{"EPERM"}, "io-uring") })
	}
}

func TestOtherKernelAttackSurfaceIsClosed(t *testing.T) {
	cases := []struct {
		name string
		want []string
		args []string
	}{
		{"perf_event_open", []string{"EPERM"}, []string{"perf-event-open"}},
		{"userfaultfd", []string{"EPERM"}, []string{"userfaultfd"}},
		{"kexec_load", []string{"EPERM"}, []string{"kexec-load"}},
		{"init_module", []string{"EPERM"}, []string{"init-module"}},
		{"finit_module", []string{"EPERM"}, []string{"finit-module"}},
		{"reboot", []string{"EPERM"}, []string{"reboot"}},
		{"clock_settime", []string{"EPERM"}, []string{"clock-settime"}},
		{"swapon", []string{"EPERM"}, []string{"swapon"}},
		{"reading the kernel log", []string{"EPERM"}, []string{"syslog"}},
		{"process_vm_readv of a sibling", []string{"EPERM"}, []string{"process-vm-readv"}},
		{"sethostname", []string{"EPERM"}, []string{"sethostname"}},
		{"mknod of a block device", []string{"EPERM"}, []string{"mknod", "/tmp/sda"}},
	}
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			var list [][]string
			for _, c := range cases {
				list = append(list, c.args)
			}
			results := batch(t, who.s, list)
			for i, c := range cases {
				t.Run(c.name+" fails", func(t *testing.T) { results[i].failed(t, c.want...) })
			}
		})
	}
}

func TestWritingProcSysAndSysFails(t *testing.T) {
	watched := []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/kernel/panic", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/hostname"}
	before := map[string][]byte{}
	for _, p := range watched {
		before[p], _ = os.ReadFile(p)
	}
	writes := []struct{ path, data string }{
		{"/proc/sys/kernel/core_pattern", "|/workspace/pwn"},
		{"/proc/sys/kernel/modprobe", "/workspace/pwn"},
		{"/proc/sys/kernel/panic", "1"},
		{"/proc/sys/vm/drop_caches", "3"},
		{"/proc/sys/kernel/hostname", "escaped"},
		{"/proc/sys/net/ipv4/ip_forward", "1"},
		{"/proc/sysrq-trigger", "h"},
		{"/sys/kernel/uevent_helper", "/workspace/pwn"},
		{"/sys/fs/cgroup/cgroup.procs", "1"},
		{"/proc/1/mem", "x"},
		{"/proc/1/attr/current", "unconfined"},
	}
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			var list [][]string
			for _, w := range writes {
				list = append(list, []string{"write", w.path, w.data})
			}
			list = append(list, []string{"write", "/proc/self/oom_score_adj", "-1000"})
			results := batch(t, who.s, list)
			for i, w := range writes {
				t.Run("writing "+w.path+" fails", func(t *testing.T) { results[i].failed(t) })
			}
			t.Run("lowering oom_score_adj fails", func(t *testing.T) {
				results[len(writes)].failed(t, "EACCES", "EPERM")
			})
		})
	}
	for _, p := range watched {
		if now, _ := os.ReadFile(p); !bytes.Equal(now, before[p]) {
			t.Errorf("ESCAPE: the host's %s changed from %q to %q", p, before[p], now)
		}
	}
}

func TestTheHostnameIsNotTheHosts(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	r := sh(t, shared(t), "cat /proc/sys/kernel/hostname")
	if got := strings.TrimSpace(string(r.Stdout)); got == host || got == "" {
		t.Errorf("the sandbox's hostname is %q, the host's %q", got, host)
	}
}

func TestDevHasNoBlockDevices(t *testing.T) {
	s := rootSession(t)
	r := sh(t, s, "find /dev -type b; ls -A /dev")
	for _, line := range strings.Fields(string(r.Stdout)) {
		if strings.HasPrefix(line, "/dev/") {
			t.Errorf("block device inside: %s", line)
		}
	}
	t.Logf("/dev holds: %s", strings.Join(strings.Fields(string(r.Stdout)), " "))
	allowed := map[string]bool{"null": true, "zero": true, "full": true, "random": true, "urandom": true, "tty": true,
		"pts": true, "ptmx": true, "shm": true, "fd": true, "stdin": true, "stdout": true, "stderr": true, "core": true}
	for _, name := range strings.Fields(string(r.Stdout)) {
		if !strings.HasPrefix(name, "/") && !allowed[name] {
			t.Errorf("unexpected /dev entry %q", name)
		}
	}
	hostDevs, _ := filepath.Glob("/sys/block/*")
	var list [][]string
	for _, d := range append(hostDevs, "/dev/mem", "/dev/kmsg", "/dev/port", "/dev/core") {
		list = append(list, []string{"read", "/dev/" + filepath.Base(d)})
	}
	results := batch(t, s, list)
	for _, o := range results {
		t.Run("reading "+o.args[1]+" fails", func(t *testing.T) { o.failed(t) })
	}
}

func TestInheritingAHostDescriptorFails(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			// containermaxprocs=0: the Go runtime of the helper would
			// otherwise keep its own cgroup files open.
			r := execIn(t, who.s, sandbox.ExecRequest{Cmd: []string{helper, "fds"}, Env: map[string]string{"GODEBUG": "containermaxprocs=0,updatemaxprocs=0"}})
			if got, out := parseResult(t, []string{"fds"}, r); got == "ok" {
				t.Fatalf("ESCAPE: a command inherited descriptors beyond stdio:\n%s", out)
			}
		})
	}
	t.Run("host descriptors left open without close-on-exec", func(t *testing.T) {
		// A program embedding agentbox may hold descriptors it inherited
		// without FD_CLOEXEC (a shell's exec 5</, a supervisor's
		// sockets). The sandbox must not inherit them: a host directory
		// or file opened outside is reachable whatever the mount view
		// and landlock say (they check paths, not open descriptors).
		planted, want := plantHostSecret(t, "")
		victim := filepath.Join(filepath.Dir(planted), "victim.txt")
		if err := os.WriteFile(victim, []byte("unchanged"), 0o644); err != nil {
			t.Fatal(err)
		}
		// High numbers, as inherited descriptors would have, clear of
		// the descriptors the backend passes on purpose.
		const dirFD, fileFD = 77, 78
		leak := func(path string, flags, fd int) {
			t.Helper()
			f, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Dup3(f, fd, 0); err != nil {
				t.Fatal(err)
			}
			unix.Close(f)
		}
		leak(filepath.Dir(planted), unix.O_RDONLY|unix.O_DIRECTORY, dirFD)
		leak(victim, unix.O_RDWR, fileFD)
		s := newSession(t, sandbox.Spec{})
		unix.Close(dirFD)
		unix.Close(fileFD)
		for _, a := range [][]string{{"openat-leaked", "secret.txt"}, {"abuse-leaked"}} {
			r := execIn(t, s, sandbox.ExecRequest{Cmd: append([]string{helper}, a...)})
			got, out := parseResult(t, a, r)
			if got == "ok" || strings.Contains(out, want) {
				t.Errorf("ESCAPE: descriptors the host process held without FD_CLOEXEC reached the sandbox (%s):\n%s", a[0], out)
			}
		}
		if b, _ := os.ReadFile(victim); string(b) != "unchanged" {
			t.Errorf("ESCAPE: the host's %s was overwritten through a leaked descriptor: %q", victim, b)
		}
	})
	t.Run("the init's descriptors are out of reach", func(t *testing.T) {
		for _, who := range bothUsers(t) {
			r := sh(t, who.s, "ls -l /proc/1/fd/ && cat /proc/1/fd/*")
			if r.ExitCode == 0 {
				t.Errorf("%s: the init's descriptors are listable:\n%s", who.name, r.Stdout)
			}
		}
	})
}
