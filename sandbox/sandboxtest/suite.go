// Package sandboxtest is the conformance suite every agentbox backend
// runs: one Run call exercises the whole sandbox.Client and Session
// contract (exec, exit codes, streams, env, cwd, stdin, timeouts that kill
// the process tree, output caps, files, PTY, lifecycle, concurrency, state
// and snapshots, and who owns what a session creates in a directory
// someone owns) as subtests named for the behaviour they check.
//
// Commands use only /bin/sh and coreutils (busybox is enough), so that the
// same suite runs against the host tools, a minimal root and an image.
//
// In a backend's tests:
//
//	func TestConformance(t *testing.T) {
//		store := sandboxtest.NewDirStore(t.TempDir())
//		sandboxtest.Run(t, func(t *testing.T) sandbox.Client {
//			c, err := mybackend.New(mybackend.Options{Snapshots: store})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return c
//		}, sandboxtest.WithSnapshots(store), sandboxtest.SkipPTY("no terminals yet"))
//	}
//
// Sessions get a fresh workspace under t.TempDir (mode 0777) unless a test
// asks the backend to create one; WithSpec adjusts every Spec.
package sandboxtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// Capability is a part of the contract a backend may not claim.
type Capability string

// Capabilities a backend can skip, with a reason.
const (
	// CapPTY: Start and Exec with TTY.
	CapPTY Capability = "pty"
	// CapResume: Resume from State in the same process.
	CapResume Capability = "resume"
	// CapPause: Pause and Unpause (sandbox.Pauser). A backend that does
	// not claim it must refuse them with sandbox.ErrUnsupported, which
	// the pause tests then check instead of skipping.
	CapPause Capability = "pause"
	// CapPorts: exposed ports reached with sandbox.DialPort. A backend
	// that cannot (NoPorts) must refuse DialPort with ErrUnsupported.
	CapPorts Capability = "ports"
	// CapWatch: Watch (sandbox.Watcher). A backend that does not claim
	// it must refuse it with sandbox.ErrUnsupported, which the watch
	// tests then check instead of skipping.
	CapWatch Capability = "watch"
	// CapEmptyNetns: network none as a network namespace with only
	// loopback. A backend whose network none is a policy on an interface
	// (NetworkNoneByPolicy) is checked by reaching out instead.
	CapEmptyNetns Capability = "empty-netns"
)

// Option adjusts the suite for a backend.
type Option func(*config)

type config struct {
	specs     []func(*sandbox.Spec)
	skips     map[Capability]string
	snapshots sandbox.SnapshotStore
}

// WithSpec adjusts every Spec the suite creates sessions with (set
// AllowWeaker, an Image, a User ...).
func WithSpec(f func(*sandbox.Spec)) Option {
	return func(c *config) { c.specs = append(c.specs, f) }
}

// WithSnapshots says the client under test was built with store, which
// turns on the snapshot tests.
func WithSnapshots(store sandbox.SnapshotStore) Option {
	return func(c *config) { c.snapshots = store }
}

// Skip skips the tests of a capability the backend does not claim; the
// reason is logged by every skipped test.
func Skip(cap Capability, reason string) Option {
	return func(c *config) { c.skips[cap] = reason }
}

// SkipPTY skips the PTY tests; the optional reason is logged.
func SkipPTY(reason ...string) Option { return Skip(CapPTY, why(reason, "no pseudo-terminal support")) }

// SkipResume skips the Resume tests; the optional reason is logged.
func SkipResume(reason ...string) Option { return Skip(CapResume, why(reason, "no resume support")) }

// NoPause says the backend cannot pause on this host: the pause tests
// check that Pause is refused with sandbox.ErrUnsupported.
func NoPause(reason string) Option { return Skip(CapPause, reason) }

// NoPorts says the backend cannot reach a session's exposed ports: the
// port tests check that DialPort is refused with sandbox.ErrUnsupported.
func NoPorts(reason string) Option { return Skip(CapPorts, reason) }

// NoWatch says the backend cannot watch a workspace: the watch tests
// check that Watch is refused with sandbox.ErrUnsupported.
func NoWatch(reason string) Option { return Skip(CapWatch, reason) }

// NetworkNoneByPolicy says the backend's network none keeps an interface
// and blocks it by policy (a Kubernetes NetworkPolicy): the network.none
// test then checks, with python3 in the image, that the sandbox reaches
// no address of this host, where the test listens.
func NetworkNoneByPolicy(reason string) Option { return Skip(CapEmptyNetns, reason) }

func why(reason []string, def string) string {
	if len(reason) == 0 || reason[0] == "" {
		return def
	}
	return reason[0]
}

// testTimeout bounds every subtest so that a hung backend fails instead of
// stalling the run.
const testTimeout = 30 * time.Second

// suite is one Run: the backend's client factory and the options.
type suite struct {
	cfg       config
	newClient func(t *testing.T) sandbox.Client
}

// Run runs the conformance suite against the backend newClient builds. It
// calls newClient once per subtest (twice for resume tests: a fresh client
// plays another process). The calling test must not be parallel: the
// environment test plants a host variable with t.Setenv.
func Run(t *testing.T, newClient func(t *testing.T) sandbox.Client, opts ...Option) {
	s := &suite{cfg: config{skips: map[Capability]string{}}, newClient: newClient}
	for _, o := range opts {
		o(&s.cfg)
	}
	for _, tc := range s.tests() {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needs != "" {
				if why, ok := s.cfg.skips[tc.needs]; ok {
					t.Skipf("backend does not claim %s: %s", tc.needs, why)
				}
			}
			tc.run(t, s)
		})
	}
}

type testCase struct {
	name  string
	needs Capability
	run   func(t *testing.T, s *suite)
}

func (s *suite) tests() []testCase {
	var all []testCase
	all = append(all, execTests()...)
	all = append(all, fileTests()...)
	all = append(all, ptyTests()...)
	all = append(all, lifecycleTests()...)
	all = append(all, pauseTests()...)
	all = append(all, portTests()...)
	all = append(all, watchTests()...)
	all = append(all, forkTests()...)
	all = append(all, policyTests()...)
	all = append(all, partTests()...)
	all = append(all, idleTests()...)
	all = append(all, ownershipTests()...)
	return all
}

// ctx is a context bounded by testTimeout.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return c
}

// spec is the base Spec of the suite's sessions: a fresh workspace under
// t.TempDir, then the backend's adjustments, then the test's.
func (s *suite) spec(t *testing.T, adjust ...func(*sandbox.Spec)) sandbox.Spec {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "workspace")
	// World-writable, not owned by a particular uid: backends run
	// commands as various users and must not depend on the test's umask.
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(ws), 0o755); err != nil {
		t.Fatal(err)
	}
	sp := sandbox.Spec{Workspace: ws}
	for _, f := range s.cfg.specs {
		f(&sp)
	}
	for _, f := range adjust {
		f(&sp)
	}
	return sp
}

// client builds the backend's client for one test.
func (s *suite) client(t *testing.T) sandbox.Client {
	t.Helper()
	c := s.newClient(t)
	if c == nil {
		t.Fatal("newClient returned nil")
	}
	return c
}

// session creates a session with the suite's spec and closes it when the
// test ends.
func (s *suite) session(t *testing.T, adjust ...func(*sandbox.Spec)) (sandbox.Client, sandbox.Session) {
	t.Helper()
	c := s.client(t)
	sess, err := c.Create(ctx(t), s.spec(t, adjust...))
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	closeAtEnd(t, sess)
	return c, sess
}

func closeAtEnd(t *testing.T, sess sandbox.Session) {
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := sess.Close(c); err != nil {
			t.Errorf("close session %s: %v", sess.ID(), err)
		}
	})
}

// sh runs a shell snippet and fails the test on an error (not on a
// non-zero exit).
func sh(t *testing.T, sess sandbox.Session, script string, adjust ...func(*sandbox.ExecRequest)) sandbox.ExecResult {
	t.Helper()
	req := sandbox.ExecRequest{Cmd: []string{"sh", "-c", script}}
	for _, f := range adjust {
		f(&req)
	}
	res, err := sandbox.Exec(ctx(t), sess, req)
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

// shOK is sh that also wants exit status 0.
func shOK(t *testing.T, sess sandbox.Session, script string, adjust ...func(*sandbox.ExecRequest)) sandbox.ExecResult {
	t.Helper()
	res := sh(t, sess, script, adjust...)
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, stdout %q, stderr %q", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res
}
