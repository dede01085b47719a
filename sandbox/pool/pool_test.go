package pool_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/sandbox/local"
	"github.com/agentbox/agentbox/sandbox/pool"
)

func localClient(t *testing.T) sandbox.Client {
	t.Helper()
	c, err := local.New(local.Options{Logger: slog.New(slog.DiscardHandler), Warn: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitReady waits until every template of p has want sessions ready.
func waitReady(t *testing.T, p *pool.Pool, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		done := true
		for _, s := range p.Stats() {
			done = done && s.Ready == want
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool never had %d ready: %+v", want, p.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAMatchingCreateIsServedFromThePoolAndRefilled(t *testing.T) {
	spec := sandbox.Spec{AllowWeaker: true, Env: map[string]string{"ROLE": "pooled"}}
	p, err := pool.New(localClient(t), pool.Options{}, pool.Template{Name: "small", Spec: spec, Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	waitReady(t, p, 2)

	s, err := p.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if st := p.Stats()[0]; st.Hits != 1 || st.Miss != 0 {
		t.Fatalf("after a matching Create: %+v, want one hit", st)
	}
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "echo $ROLE"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "pooled" {
		t.Fatalf("the pooled session runs %q, %v; want its template's env", res.Stdout, err)
	}
	waitReady(t, p, 2) // the taken session was replaced

	other := sandbox.Spec{AllowWeaker: true}
	o, err := p.Create(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	if st := p.Stats()[0]; st.Hits != 1 || st.Ready != 2 {
		t.Fatalf("a Create that matches no template took from the pool: %+v", st)
	}
}

func TestCloseEndsTheSessionsNotHandedOut(t *testing.T) {
	spec := sandbox.Spec{AllowWeaker: true}
	p, err := pool.New(localClient(t), pool.Options{}, pool.Template{Spec: spec, Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, 2)
	taken, err := p.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close(context.Background())
	waitReady(t, p, 2)
	var workspaces []string
	// The ready sessions' workspaces are their own temporary directories.
	for range 2 {
		s, err := p.Create(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		workspaces = append(workspaces, s.State().Workspace)
		_ = s.Close(context.Background())
	}
	waitReady(t, p, 2)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats()[0]; st.Ready != 0 {
		t.Fatalf("after Close: %+v", st)
	}
	for _, w := range workspaces {
		if _, err := os.Stat(w); !os.IsNotExist(err) {
			t.Errorf("workspace %s of a closed session: %v", w, err)
		}
	}
	if _, err := sandbox.Exec(context.Background(), taken, sandbox.ExecRequest{Cmd: []string{"true"}}); err != nil {
		t.Fatalf("a session handed out before Close was ended by it: %v", err)
	}
}

func TestATemplateThatCannotBePooledIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		tmpl pool.Template
		want string
	}{
		"no size":           {pool.Template{Spec: sandbox.Spec{}}, "keep at least one"},
		"a host workspace":  {pool.Template{Spec: sandbox.Spec{Workspace: "/srv/p"}, Size: 1}, "workspace of its own"},
		"a session timeout": {pool.Template{Spec: sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{SessionTimeout: time.Minute}}}, Size: 1}, "would start when the pooled session is made"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pool.New(localClient(t), pool.Options{}, tc.tmpl)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// probe is what a session shows of itself that an earlier user could
// have changed: the workspace and /tmp, the processes, the environment,
// the network interfaces.
// ps runs alone (not in a pipe whose other end may not have exec'd yet).
const probe = `ls -A /workspace /tmp; procs=$(ps -e -o comm=); echo "$procs" | sort; env | grep -v '^HOSTNAME=' | sort; cat /proc/net/dev | cut -d: -f1`

func TestAPooledNativeSessionIsLikeAFreshOne(t *testing.T) {
	testenv.NeedRoot(t, "the linux backend")
	c, err := linux.New(linux.Options{StateDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		testenv.Skipf(t, "linux backend unavailable: %v", err)
	}
	spec := sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 256 << 20}}}
	p, err := pool.New(c, pool.Options{}, pool.Template{Spec: spec, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	waitReady(t, p, 1)
	// Let the pooled session sit a while, as it would between requests.
	time.Sleep(200 * time.Millisecond)
	pooled, err := p.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer pooled.Close(context.Background())
	fresh, err := c.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(context.Background())
	if p.Stats()[0].Hits != 1 {
		t.Fatalf("the Create was not served from the pool: %+v", p.Stats())
	}
	run := func(s sandbox.Session) string {
		res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", probe}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("probe: %v, exit %d, %s", err, res.ExitCode, res.Stderr)
		}
		return string(res.Stdout)
	}
	if a, b := run(pooled), run(fresh); a != b {
		t.Fatalf("a pooled session differs from a fresh one:\npooled:\n%s\nfresh:\n%s", a, b)
	}
}
