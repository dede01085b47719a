//go:build kube

package kube

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/attacktest"
	"github.com/agentbox/agentbox/sandbox"
)

// The node is this host: a file planted here, in any of the places a Pod
// could be thought to see, must stay out of the session's reach.
func TestEscapeReadingHostFilesFails(t *testing.T) {
	s := escapeSession(t, escapeClient(t), sandbox.Spec{})
	dir, err := os.MkdirTemp("/tmp", "agentbox-kube-escape-secret-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	planted := filepath.Join(dir, "secret.txt")
	want := secretOf(t)
	if err := os.WriteFile(planted, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{
		planted, "/proc/1/root" + planted, "/proc/self/root" + planted,
		// The cluster's own credentials on the node.
		kubeconfig(), "/var/lib/agentbox-kube/pki/ca.key", "/var/lib/kubelet/pki/kubelet-client-current.pem",
		// The service account token that automountServiceAccountToken
		// false keeps out.
		"/var/run/secrets/kubernetes.io/serviceaccount/token",
		"/run/secrets/kubernetes.io/serviceaccount/token",
	}
	var list [][]string
	for _, p := range paths {
		list = append(list, []string{"read", p})
	}
	list = append(list, []string{"read", "/proc/kcore"}, []string{"read", "/dev/mem"}, []string{"read", "/dev/kmsg"})
	results := attacktest.Batch(t, s, helperInPod, list)
	for i, p := range paths {
		t.Run("reading "+p+" fails", func(t *testing.T) {
			o := results[i]
			if strings.Contains(o.Out, want) {
				t.Fatalf("ESCAPE: read the host's %s from inside:\n%s", p, o.Out)
			}
			o.Failed(t, "ENOENT")
		})
	}
	t.Run("/proc/kcore is masked", func(t *testing.T) {
		// The runtime binds /dev/null over it: a read succeeds with
		// nothing (EPERM would do as well).
		o := results[len(paths)]
		if o.Got == "ok" && !strings.Contains(o.Out, `content: ""`) {
			t.Fatalf("ESCAPE: /proc/kcore gave kernel memory:\n%.300s", o.Out)
		}
		t.Logf("%s: %s", o.Got, strings.TrimSpace(o.Out))
	})
	for _, o := range results[len(paths)+1:] {
		t.Run("reading "+o.Args[1]+" fails", func(t *testing.T) { o.Failed(t, "ENOENT") })
	}
	t.Run("ReadFile through a planted link reads the Pod's own files", func(t *testing.T) {
		if r := podSh(t, s, "ln -s "+planted+" link && ln -s /proc/1/root"+planted+" link2"); r.ExitCode != 0 {
			t.Fatal(string(r.Stderr))
		}
		for _, l := range []string{"link", "link2"} {
			b, err := s.ReadFile(context.Background(), l)
			if strings.Contains(string(b), want) {
				t.Fatalf("ESCAPE: ReadFile(%s) read the host's file", l)
			}
			if err == nil {
				t.Errorf("ReadFile(%s) = %q, want not found", l, b)
			}
		}
	})
}

// Without the service account token the session has no credential for
// the API server or the kubelet, and both refuse it: it cannot reach
// other Pods (exec into them, read their secrets) through the control
// plane. The session has network host (no NetworkPolicy), so that the
// servers answer and their refusal is what stops it.
func TestEscapeTheControlPlaneRefusesTheSession(t *testing.T) {
	c := escapeClient(t)
	// Network host: no NetworkPolicy, so that the servers answer (the
	// Pod still has its own network namespace).
	s := escapeSession(t, c, sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}}})
	api, err := url.Parse(c.rest.Host)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodeIP := nodeAddress(t, ctx, c)
	apiHost := api.Host
	if h, p, err := net.SplitHostPort(apiHost); err == nil && (h == "127.0.0.1" || h == "localhost") {
		apiHost = net.JoinHostPort(nodeIP, p) // the Pod's 127.0.0.1 is its own
	}
	urls := []string{
		"https://" + apiHost + "/api/v1/namespaces/" + testNamespace + "/pods",
		"https://" + apiHost + "/api/v1/secrets",
		"https://" + apiHost + "/api/v1/nodes",
		"https://" + net.JoinHostPort(nodeIP, "10250") + "/pods",
		"https://" + net.JoinHostPort(nodeIP, "10250") + "/run/" + testNamespace + "/x/session",
	}
	// python3 is in the sandbox image; certificates are not checked (the
	// session has no CA either), only what the server answers.
	const probe = `import ssl, sys, urllib.request
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
for u in sys.argv[1:]:
    try:
        r = urllib.request.urlopen(u, context=ctx, timeout=4)
        print("status", r.status, u)
    except urllib.error.HTTPError as e:
        print("status", e.code, u)
    except Exception as e:
        print("unreachable", type(e).__name__, u)
`
	r := attacktest.Exec(t, s, sandbox.ExecRequest{Cmd: append([]string{"python3", "-c", probe}, urls...), Timeout: time.Minute})
	if r.ExitCode != 0 {
		t.Fatalf("probe: exit %d: %s", r.ExitCode, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(r.Stdout)), "\n")
	if len(lines) != len(urls) {
		t.Fatalf("probe answered %d of %d: %q", len(lines), len(urls), r.Stdout)
	}
	for i, u := range urls {
		t.Run(u, func(t *testing.T) {
			f := strings.Fields(lines[i])
			switch {
			case f[0] == "unreachable":
				t.Fatalf("no answer (%s): the test needs the server's refusal", f[1])
			case f[1] == "401" || f[1] == "403":
				t.Logf("refused: %s", f[1])
			default:
				t.Fatalf("ESCAPE: the session was answered %q", lines[i])
			}
		})
	}
}

// A Pod has its own network namespace (no hostNetwork): the node's
// loopback listeners and abstract unix sockets are not the Pod's.
func TestEscapeTheNodesLoopbackIsOutOfReach(t *testing.T) {
	s := escapeSession(t, escapeClient(t), sandbox.Spec{})
	greeting := secretOf(t)
	serve := func(ln net.Listener) {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, greeting)
				c.Close()
			}
		}()
	}
	var list [][]string
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("no %s loopback here: %v", network, err)
			continue
		}
		defer ln.Close()
		serve(ln)
		list = append(list, []string{"connect", ln.Addr().String()})
	}
	abstract := "@agentbox-kube-escape-" + strconv.Itoa(os.Getpid())
	ln, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serve(ln)
	list = append(list, []string{"connect-unix", abstract})
	for _, o := range attacktest.Batch(t, s, helperInPod, list) {
		t.Run(o.Args[0]+" "+o.Args[1]+" fails", func(t *testing.T) {
			if strings.Contains(o.Out, greeting) {
				t.Fatalf("ESCAPE: reached the node's listener:\n%s", o.Out)
			}
			o.Failed(t, "ECONNREFUSED", "ENETUNREACH", "EADDRNOTAVAIL")
		})
	}
}

// Sessions are Pods of their own: one sees neither another's processes
// nor its workspace, nor this host's processes.
func TestEscapeOtherSessionsAreOutOfReach(t *testing.T) {
	c := escapeClient(t)
	victim := escapeSession(t, c, sandbox.Spec{})
	s := escapeSession(t, c, sandbox.Spec{})
	mark := secretOf(t)
	// The pattern a grep looks for, which its own command line does not
	// match.
	pat := "[" + mark[:1] + "]" + mark[1:]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := victim.WriteFile(ctx, "victim.txt", []byte(mark), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := victim.Start(ctx, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "sleep 600; : " + mark}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill(context.Background())
	// The victim's sleep shows up in its own Pod's /proc first.
	for i := 0; ; i++ {
		if r := podSh(t, victim, "grep -l '"+pat+"' /proc/[0-9]*/cmdline"); r.ExitCode == 0 {
			break
		}
		if i == 50 {
			t.Fatal("the victim's process never showed up in its own /proc")
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := podSh(t, s, "grep -l '"+pat+"' /proc/[0-9]*/cmdline; grep -rl '"+pat+"' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null; "+
		"grep -l '[k]ube.test' /proc/[0-9]*/cmdline; ls /proc | grep -c '^[0-9]'")
	f := strings.Fields(string(r.Stdout))
	if len(f) != 1 {
		t.Fatalf("ESCAPE: another session's process or workspace, or this host's test process, is visible:\n%s", r.Stdout)
	}
	// The init, the exec's shell and grep, ls, grep: a handful.
	if n, _ := strconv.Atoi(f[0]); n > 8 {
		t.Errorf("the session sees %d processes: more than its own", n)
	}
	t.Run("kill -1 reaches only the session's own processes", func(t *testing.T) {
		podSh(t, s, "kill -KILL -1")
		if r := podSh(t, victim, "grep -l '"+pat+"' /proc/[0-9]*/cmdline"); r.ExitCode != 0 {
			t.Fatal("ESCAPE: kill -1 in one session killed another's process")
		}
	})
}

// The resources the backend claims (memory, cpu, disk) bound a session
// that tries to take more; a fork bomb is not tried (resources.pids is
// not claimed: see what does not apply, atop escape_test.go).
func TestEscapeResourceBombsAreBounded(t *testing.T) {
	const memory, disk = 128 << 20, 16 << 20
	s := escapeSession(t, escapeClient(t), sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{
		MemoryBytes: memory, DiskBytes: disk, CPUs: 0.25,
	}}})
	t.Run("a memory bomb is killed", func(t *testing.T) {
		r := attacktest.Exec(t, s, sandbox.ExecRequest{Cmd: []string{helperInPod, "alloc", "1024"}, Timeout: time.Minute})
		if strings.Contains(string(r.Stdout), "allocated: 1024 MiB") {
			t.Fatalf("ESCAPE: 1 GiB allocated under a limit of 144 MiB: %q", r.Stdout)
		}
		if r.ExitCode == 0 {
			t.Fatalf("the bomb exited 0: %q", r.Stdout)
		}
		t.Logf("exit %d %s OOMKilled=%v", r.ExitCode, r.Signal, r.OOMKilled)
		if r := podSh(t, s, "echo alive"); strings.TrimSpace(string(r.Stdout)) != "alive" {
			t.Fatalf("the session did not survive its command's OOM kill: %q %q", r.Stdout, r.Stderr)
		}
	})
	t.Run("filling the workspace stops at the disk limit", func(t *testing.T) {
		o := attacktest.Run(t, s, helperInPod, "fill", sandbox.DefaultWorkdir, "4", "64")
		o.Failed(t, "ENOSPC")
		if n := writtenOf(o.Out); n > disk {
			t.Errorf("wrote %d bytes into a workspace of %d", n, disk)
		}
		podSh(t, s, "rm -f "+sandbox.DefaultWorkdir+"/fill.*")
	})
	t.Run("filling /tmp stops at its size, and the session still runs commands", func(t *testing.T) {
		o := attacktest.Run(t, s, helperInPod, "fill", "/tmp", "4", "64")
		o.Failed(t, "ENOSPC")
		if n := writtenOf(o.Out); n > 64<<20 {
			t.Errorf("wrote %d bytes into /tmp of 64 MiB", n)
		}
		// The exec wrapper's pid files are on a volume of their own.
		if r := podSh(t, s, "rm -f /tmp/fill.*; echo emptied"); strings.TrimSpace(string(r.Stdout)) != "emptied" {
			t.Fatalf("a full /tmp broke the next exec: exit %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
		}
	})
	t.Run("two busy loops get a quarter of a cpu", func(t *testing.T) {
		// Over 4 seconds of wall time two spinning processes would use
		// 8 cpu-seconds unbounded (about 4 on a busy 2-core host); the
		// limit allows 1.
		const spin = `import os, time
def burn():
    end = time.time() + 4
    while time.time() < end: pass
pids = [os.fork() for _ in range(2)]
if 0 in pids:
    burn(); os._exit(0)
for p in pids: os.waitpid(p, 0)
t = os.times()
print(t.children_user + t.children_system)
`
		r := attacktest.Exec(t, s, sandbox.ExecRequest{Cmd: []string{"python3", "-c", spin}, Timeout: time.Minute})
		used, err := strconv.ParseFloat(strings.TrimSpace(string(r.Stdout)), 64)
		if err != nil {
			t.Fatalf("spin: exit %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
		}
		if used > 2 {
			t.Fatalf("ESCAPE: two busy loops used %.2f cpu-seconds in 4 s under a limit of 0.25 cpu", used)
		}
		t.Logf("used %.2f cpu-seconds in 4 s", used)
	})
}

func writtenOf(out string) int64 {
	_, rest, _ := strings.Cut(out, "written: ")
	n, _ := strconv.ParseInt(strings.Fields(rest + " 0")[0], 10, 64)
	return n
}

// secretOf is a unique string for one test, to plant and look for.
func secretOf(t *testing.T) string {
	return fmt.Sprintf("agentbox-kube-escape-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}
