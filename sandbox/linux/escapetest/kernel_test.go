package escapetest

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/attacktest"
	"github.com/agentbox/agentbox/sandbox"
)

func TestMountingFails(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			if r := sh(t, who.s, "mkdir -p "+attacktest.MountScratch+"/old"); r.ExitCode != 0 {
				t.Fatal(string(r.Stderr))
			}
			refused(t, who.s, attacktest.Mounts)
			t.Run("mount(8) fails", func(t *testing.T) {
				r := sh(t, who.s, "mount -t tmpfs none "+attacktest.MountScratch)
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
			refused(t, who.s, attacktest.Namespaces)
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

// The kernel's attack surface that is not namespaced (keyrings, bpf,
// io_uring, modules, the clock, raw sockets, file handles, ...):
// internal/attacktest's list, which the kube backend's escape tests
// range over too.
func TestKernelAttackSurfaceIsClosed(t *testing.T) {
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) { refused(t, who.s, attacktest.Kernel) })
	}
}

func TestWritingProcSysAndSysFails(t *testing.T) {
	watched := []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/kernel/panic", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/hostname"}
	before := map[string][]byte{}
	for _, p := range watched {
		before[p], _ = os.ReadFile(p)
	}
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) { refused(t, who.s, attacktest.KernelWrites) })
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
		t.Run("reading "+o.Args[1]+" fails", func(t *testing.T) { o.Failed(t) })
	}
}
