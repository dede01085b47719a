package linux

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// With Options.FirstSession the first session's network namespace is made
// on a thread of the client, and the init is forked from that thread. The
// session must end up exactly as isolated as one whose init was cloned
// with CLONE_NEWNET: a namespace of its own (not the host's, not another
// session's) with only a loopback device, shared by the init and its
// commands; and the client must keep no thread in it.
func TestTheFirstSessionsNetworkNamespaceIsItsOwn(t *testing.T) {
	c := newTestClientWith(t, Options{StateDir: t.TempDir(), FirstSession: true})
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	// The namespace is not made on the main thread (see startNetThread),
	// which the runtime may pick: a few tries get another.
	for try := 0; ; try++ {
		if try > 0 {
			c = newTestClientWith(t, Options{StateDir: t.TempDir(), FirstSession: true})
		}
		<-c.firstNet.ready
		if c.firstNet.ns != "" {
			break
		}
		c.firstNet.release()
		if try == 20 {
			t.Fatal("the first session's network namespace was never made")
		}
	}
	prepared := c.firstNet.ns
	// A Create refused for its spec leaves the namespace to the next one.
	if _, err := c.Create(context.Background(), sandbox.Spec{User: "not-a-uid"}); err == nil {
		t.Fatal("Create with user \"not-a-uid\" succeeded")
	}
	first := newTestSession(t, c, sandbox.Spec{})  // born in the prepared namespace
	second := newTestSession(t, c, sandbox.Spec{}) // cloned with CLONE_NEWNET
	if ns, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(first.(*session).h.InitPID), "ns/net")); err != nil || ns != prepared {
		t.Errorf("the first session's init is in network namespace %q (%v), not the one prepared for it, %s", ns, err, prepared)
	}
	seen := map[string]string{}
	for name, s := range map[string]sandbox.Session{"first": first, "second": second} {
		res := run(t, s, "readlink", "/proc/self/ns/net")
		inside := strings.TrimSpace(string(res.Stdout))
		if inside == "" || inside == host {
			t.Errorf("%s session: a command's network namespace is %q, the host's is %q", name, inside, host)
		}
		if other, ok := seen[inside]; ok {
			t.Errorf("the %s and %s sessions share network namespace %s", name, other, inside)
		}
		seen[inside] = name
		pid := strconv.Itoa(s.(*session).h.InitPID)
		if ns, err := os.Readlink(filepath.Join("/proc", pid, "ns/net")); err != nil || ns != inside {
			t.Errorf("%s session: its init (pid %s) is in network namespace %q (%v), its command in %q", name, pid, ns, err, inside)
		}
		res = run(t, s, "sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
		if got := strings.TrimSpace(string(res.Stdout)); got != "lo" {
			t.Errorf("%s session: interfaces = %q, want only lo", name, got)
		}
	}
	// The thread the namespace was made on is back in the host's before
	// Create returns: no thread of the client stays behind (the host's
	// namespace is read first, before any could be elsewhere).
	if stray := threadsOutside(t, host); len(stray) > 0 {
		t.Errorf("client threads outside the host's network namespace: %v", stray)
	}
}

// threadsOutside lists this process's threads whose network namespace is
// not ns.
func threadsOutside(t *testing.T, ns string) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range tasks {
		got, err := os.Readlink(filepath.Join("/proc/self/task", e.Name(), "ns/net"))
		if err == nil && got != ns {
			out = append(out, e.Name()+": "+got)
		}
	}
	return out
}
