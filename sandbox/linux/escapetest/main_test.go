package escapetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/attacktest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
)

// helperDir is the mount point of the helper directory inside every
// session; helper is the attack binary there.
const (
	helperDir = "/opt/escapetest"
	helper    = helperDir + "/attack"
)

var (
	// helperBinary is the attack binary, built once in TestMain.
	helperBinary attacktest.Binary
	// hostHelperDir holds the attack binary on the host.
	hostHelperDir string
	// hostHelper is its host path.
	hostHelper string
	buildErr   error
	// stateDir is the state directory of every client in this package.
	stateDir string

	// sessions shared between tests, by name, closed after the run.
	sharedMu   sync.Mutex
	sharedSess = map[string]sandbox.Session{}
)

// hostEnvSecret is set in the test process's environment before any
// session starts; no session may ever see it.
const hostEnvSecret = "AGENTBOX_ESCAPETEST_HOST_SECRET"

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "agentbox-escapetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "escapetest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	stateDir = filepath.Join(dir, "state")
	os.Setenv(hostEnvSecret, hostEnvValue)
	switch {
	case rootless():
		// Run by TestEveryAttackAlsoFailsRootless, which built the
		// helper and made it readable.
		hostHelperDir = rootlessHelperDir()
		hostHelper = filepath.Join(hostHelperDir, "attack")
	case os.Geteuid() == 0:
		hostHelper, buildErr = helperBinary.Path()
		hostHelperDir = filepath.Dir(hostHelper)
	}
	code := m.Run()
	if err := helperBinary.Remove(); err != nil {
		fmt.Fprintln(os.Stderr, "escapetest:", err)
		code = 1
	}
	for name, s := range sharedSess {
		if err := s.Close(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "escapetest: close the shared session %q: %v\n", name, err)
			code = 1
		}
	}
	return code
}

// newClient returns a linux client, or skips when the backend cannot run.
func newClient(t testing.TB) *linux.Client {
	t.Helper()
	if !rootless() {
		testenv.NeedRoot(t, "the escape tests (TestEveryAttackAlsoFailsRootless runs them as nobody)")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	c, err := linux.New(linux.Options{StateDir: stateDir, Logger: backendLog.logger()})
	if err != nil {
		testenv.Skipf(t, "linux backend unavailable: %v", err)
	}
	return c
}

// withHelper adds the read-only mount of the attack helper to spec.
func withHelper(spec sandbox.Spec) sandbox.Spec {
	spec.Mounts = append([]sandbox.Mount{{Source: hostHelperDir, Target: helperDir, ReadOnly: true}}, spec.Mounts...)
	return spec
}

// newSession creates a session with the helper mounted, closed when the
// test ends.
func newSession(t testing.TB, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	c := newClient(t)
	s, err := c.Create(context.Background(), withHelper(spec))
	if err != nil {
		t.Fatalf("create a session: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close the session: %v", err)
		}
	})
	return s
}

// hostEnvValue is the value of hostEnvSecret.
var hostEnvValue = fmt.Sprintf("host-env-secret-%d", time.Now().UnixNano())

// shared is one plain session (the default unprivileged user) for the
// attacks that do not damage it.
func shared(t testing.TB) sandbox.Session {
	t.Helper()
	return sharedSession(t, "user", sandbox.Spec{})
}

// rootSession is a shared session whose commands run as uid 0 inside:
// root without capabilities, the strongest identity a spec can ask for.
func rootSession(t testing.TB) sandbox.Session {
	t.Helper()
	return sharedSession(t, "root", sandbox.Spec{User: "0"})
}

func sharedSession(t testing.TB, name string, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	c := newClient(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if s, ok := sharedSess[name]; ok {
		return s
	}
	s, err := c.Create(context.Background(), withHelper(spec))
	if err != nil {
		t.Fatalf("create the shared %s session: %v", name, err)
	}
	sharedSess[name] = s
	return s
}

// bothUsers are the shared sessions of the default user and of root
// inside, for attacks that must fail for either.
func bothUsers(t testing.TB) []namedSession {
	return []namedSession{{"as the sandbox user", shared(t)}, {"as root inside the sandbox", rootSession(t)}}
}

type namedSession struct {
	name string
	s    sandbox.Session
}

// enforces reports whether the client enforces part p.
func enforces(c *linux.Client, p sandbox.Part) bool {
	for _, e := range c.Enforces() {
		if e == p {
			return true
		}
	}
	return false
}

// execIn runs cmd in s with a timeout and fails the test if it cannot be
// run at all.
func execIn(t testing.TB, s sandbox.Session, req sandbox.ExecRequest) sandbox.ExecResult {
	t.Helper()
	return attacktest.Exec(t, s, req)
}

// sh runs a shell command in s.
func sh(t testing.TB, s sandbox.Session, script string) sandbox.ExecResult {
	t.Helper()
	return execIn(t, s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", script}})
}

// attack runs the helper in s and returns the result it reported ("ok"
// when the attack worked, else the errno name) and its whole output.
func attack(t testing.TB, s sandbox.Session, args ...string) (string, string) {
	t.Helper()
	res := execIn(t, s, sandbox.ExecRequest{Cmd: append([]string{helper}, args...)})
	return parseResult(t, args, res)
}

func parseResult(t testing.TB, args []string, res sandbox.ExecResult) (string, string) {
	t.Helper()
	o, err := attacktest.Parse(args, res)
	if err != nil {
		t.Fatal(err)
	}
	return o.Got, o.Out
}

// batch runs several attacks in one helper process (one exec instead of
// many) and returns each one's result and output, in order.
func batch(t testing.TB, s sandbox.Session, list [][]string) []outcome {
	t.Helper()
	return attacktest.Batch(t, s, helper, list)
}

// refused runs attacks (internal/attacktest's lists) in one helper
// process in s and asserts that each is refused as its entry says.
func refused(t *testing.T, s sandbox.Session, attacks []attacktest.Attack) {
	t.Helper()
	attacktest.Refused(t, s, helper, attacks)
}

// shBatch runs several shell snippets in one exec, each in its own
// subshell, and returns each one's exit status and output.
func shBatch(t testing.TB, s sandbox.Session, scripts []string) []shOutcome {
	t.Helper()
	var b strings.Builder
	for i, sc := range scripts {
		fmt.Fprintf(&b, "out=$( (%s) 2>&1 ); echo \"=== %d $?\"; printf '%%s\\n' \"$out\"\n", sc, i)
	}
	res := sh(t, s, b.String())
	parts := strings.Split(string(res.Stdout), "=== ")
	if len(parts) != len(scripts)+1 {
		t.Fatalf("shell batch did not report each snippet (exit %d): %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	out := make([]shOutcome, len(scripts))
	for i, p := range parts[1:] {
		head, body, _ := strings.Cut(p, "\n")
		var n, code int
		fmt.Sscanf(head, "%d %d", &n, &code)
		out[i] = shOutcome{code: code, out: strings.TrimSpace(body)}
	}
	return out
}

type shOutcome struct {
	code int
	out  string
}

// outcome is one attack's report; its failed asserts that the attack was
// stopped, with one of the errnos given when any are.
type outcome = attacktest.Outcome

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// secret is a unique string for one test, to plant and look for.
func secret(t testing.TB) string {
	return fmt.Sprintf("agentbox-escapetest-secret-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}

// assertRefused checks that a backend which does not enforce part refuses
// a spec that needs it, naming the part: that is the correct answer to an
// attack the host cannot stop.
func assertRefused(t *testing.T, spec sandbox.Spec, part sandbox.Part) {
	t.Helper()
	c := newClient(t)
	s, err := c.Create(context.Background(), withHelper(spec))
	if err == nil {
		s.Close(context.Background())
		t.Fatalf("the backend does not list %s in Enforces but created a session that needs it", part)
	}
	if !errors.Is(err, sandbox.ErrPolicyUnsupported) || !strings.Contains(err.Error(), string(part)) {
		t.Fatalf("create = %v, want ErrPolicyUnsupported naming %s", err, part)
	}
	t.Logf("this host cannot enforce %s; the backend refuses it: %v", part, err)
}

// backendLog collects what every client logs (warnings such as egress
// refusals), so that tests can look for a denial there and the test
// output stays quiet.
var backendLog lockedBuffer

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// initPID is the host pid of s's init, as a string for /proc paths.
func initPID(t testing.TB, s sandbox.Session) string {
	t.Helper()
	pid, err := linux.InitPID(s.State())
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(pid)
}

// stateDirOf is the host directory of s's state (its control socket,
// its state.json), read from the state's handles as any tool would.
func stateDirOf(t testing.TB, s sandbox.Session) string {
	t.Helper()
	var h struct {
		StateDir string `json:"state_dir"`
	}
	if err := json.Unmarshal(s.State().Handles, &h); err != nil || h.StateDir == "" {
		t.Fatalf("state handles %s: %v", s.State().Handles, err)
	}
	return h.StateDir
}
