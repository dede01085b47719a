package local_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
)

type harness struct {
	c    *local.Client
	warn *bytes.Buffer
	log  *bytes.Buffer
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{warn: &bytes.Buffer{}, log: &bytes.Buffer{}}
	c, err := local.New(local.Options{Warn: h.warn, Logger: slog.New(slog.NewTextHandler(h.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

func (h *harness) create(t *testing.T, spec sandbox.Spec) sandbox.Session {
	t.Helper()
	s, err := h.c.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func weaker(sp sandbox.Spec) sandbox.Spec { sp.AllowWeaker = true; return sp }

func TestCreateRefusesWhatItCannotEnforce(t *testing.T) {
	tests := []struct {
		name      string
		spec      sandbox.Spec
		wantParts []string
	}{
		{"the default policy is refused naming isolation and network", sandbox.Spec{},
			[]string{"filesystem.isolation", "processes.isolation", "identity", "network.none"}},
		{"a memory limit is refused by name", sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 64 << 20}}},
			[]string{"resources.memory"}},
		{"an allow-list is refused by name", sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowList, Allow: []string{"example.com"}}}},
			[]string{"network.allowlist"}},
		{"read-only paths are refused by name", sandbox.Spec{Policy: sandbox.Policy{Filesystem: sandbox.FilesystemPolicy{ReadOnly: []string{"/workspace/in"}}}},
			[]string{"filesystem.read_only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TMPDIR", t.TempDir())
			h := newHarness(t)
			_, err := h.c.Create(context.Background(), tt.spec)
			if !errors.Is(err, sandbox.ErrPolicyUnsupported) {
				t.Fatalf("err = %v, want ErrPolicyUnsupported", err)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not name %s", err, p)
				}
			}
			if left, _ := os.ReadDir(os.Getenv("TMPDIR")); len(left) != 0 {
				t.Errorf("a refused create left %s behind", left[0].Name())
			}
			if h.warn.Len() != 0 {
				t.Errorf("a refused create printed the run warning: %s", h.warn)
			}
		})
	}
}

func TestCreateRefusesBadSpecs(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		name string
		spec sandbox.Spec
		kind error
	}{
		{"mounts are refused", sandbox.Spec{Mounts: []sandbox.Mount{{Source: "/etc", Target: "/mnt/etc"}}}, sandbox.ErrPolicyUnsupported},
		{"a missing workspace is not found", sandbox.Spec{Workspace: missing}, sandbox.ErrNotFound},
		{"a malformed user is invalid", sandbox.Spec{User: "bob"}, sandbox.ErrInvalid},
		{"a contradictory policy is invalid", sandbox.Spec{Policy: sandbox.Policy{Network: sandbox.NetworkPolicy{Allow: []string{"x.com"}}}}, sandbox.ErrInvalid},
		{"a snapshot without a store is invalid", sandbox.Spec{Snapshot: "abc"}, sandbox.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if _, err := h.c.Create(context.Background(), weaker(tt.spec)); !errors.Is(err, tt.kind) {
				t.Fatalf("err = %v, want %v", err, tt.kind)
			}
		})
	}
}

func TestAllowWeakerWarnsOncePerSessionAndLogsEachPart(t *testing.T) {
	h := newHarness(t)
	s := h.create(t, weaker(sandbox.Spec{Workspace: t.TempDir()}))
	for range 3 {
		if _, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	warn := h.warn.String()
	if n := strings.Count(warn, "agentbox: WARNING: backend local confines NOTHING: "); n != 1 {
		t.Fatalf("warning printed %d times: %q", n, warn)
	}
	if !strings.Contains(warn, "network.none") || !strings.Contains(warn, "filesystem.isolation") {
		t.Errorf("warning does not name the unenforced parts: %q", warn)
	}
	for _, part := range []string{"filesystem.isolation", "processes.isolation", "identity", "network.none"} {
		if !strings.Contains(h.log.String(), part) {
			t.Errorf("log does not record weakened part %s: %s", part, h.log)
		}
	}
	h.create(t, weaker(sandbox.Spec{Workspace: t.TempDir()}))
	if n := strings.Count(h.warn.String(), "confines NOTHING"); n != 2 {
		t.Fatalf("a second session printed %d warnings in all, want 2", n)
	}
	if got := h.c.Enforces(); len(got) != 3 {
		t.Fatalf("Enforces() = %v, want only the timeouts (idle included) and output", got)
	}
}

func TestEnvironmentIsMinimalAndNamesTheWorkspace(t *testing.T) {
	h := newHarness(t)
	ws := t.TempDir()
	s := h.create(t, weaker(sandbox.Spec{Workspace: ws, Env: map[string]string{"PATH": "/bin:/usr/bin", "A": "1"}}))
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"env"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	want := map[string]string{"PATH": "/bin:/usr/bin", "A": "1", "HOME": ws, "AGENTBOX_WORKSPACE": ws}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && k != "SHLVL" && k != "_" && k != "OLDPWD" && k != "PWD" {
			t.Errorf("unexpected variable %s=%q: the host environment leaked", k, got[k])
		}
	}
}

func TestCommandsAreLookedUpInTheSandboxPath(t *testing.T) {
	h := newHarness(t)
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "bin", "hello-tool"), []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := h.create(t, weaker(sandbox.Spec{Workspace: ws, Env: map[string]string{"PATH": ws + "/bin:/bin:/usr/bin"}}))
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"hello-tool"}})
	if err != nil || string(res.Stdout) != "tool\n" {
		t.Fatalf("hello-tool: %q, %v", res.Stdout, err)
	}
	if _, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"no-such-tool-anywhere"}}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("missing command: err = %v, want ErrNotFound", err)
	}
}

func TestSessionTimeoutEndsTheSession(t *testing.T) {
	h := newHarness(t)
	s := h.create(t, weaker(sandbox.Spec{Workspace: t.TempDir(), Policy: sandbox.Policy{Resources: sandbox.Resources{SessionTimeout: 300 * time.Millisecond}}}))
	start := time.Now()
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"sleep", "10"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || len(res.Violations) == 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("got %+v after %v; want a timed-out exec with a violation", res.ExitStatus, time.Since(start))
	}
	if _, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("exec after the session timeout: err = %v, want ErrTimeout", err)
	}
}

// processAlive reports whether pid runs (a zombie counts as dead).
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func TestCloseAndStopKillBackgroundProcesses(t *testing.T) {
	for _, how := range []string{"Close", "Stop"} {
		t.Run(how+" kills what an exec left running in the background", func(t *testing.T) {
			h := newHarness(t)
			ws := t.TempDir()
			s := h.create(t, weaker(sandbox.Spec{Workspace: ws}))
			res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exec: %+v %v", res, err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
			if !processAlive(pid) {
				t.Fatalf("background sleep %d is not running", pid)
			}
			if how == "Close" {
				err = s.Close(context.Background())
			} else {
				err = s.Stop(context.Background())
			}
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for processAlive(pid) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if processAlive(pid) {
				t.Fatalf("background sleep %d survived %s", pid, how)
			}
			if _, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
				t.Fatalf("exec after %s: err = %v, want ErrClosed", how, err)
			}
			if _, err := os.Stat(ws); err != nil {
				t.Fatalf("%s removed a workspace the session did not create: %v", how, err)
			}
		})
	}
}

func TestDeleteAndResume(t *testing.T) {
	h := newHarness(t)
	s := h.create(t, weaker(sandbox.Spec{}))
	st := s.State()
	if !st.OwnsWorkspace || st.Workspace == "" {
		t.Fatalf("state %+v: want an owned workspace", st)
	}
	if err := h.c.Delete(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.Workspace); !os.IsNotExist(err) {
		t.Fatalf("Delete left the workspace: %v", err)
	}
	if _, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("exec after Delete: err = %v, want ErrClosed", err)
	}
	if err := h.c.Delete(context.Background(), st); err != nil {
		t.Fatalf("deleting what is gone: %v", err)
	}
	if _, err := h.c.Resume(context.Background(), st); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("resume without workspace: err = %v, want ErrGone", err)
	}
	if _, err := h.c.Rebuild(context.Background(), st); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("rebuild without workspace or snapshot: err = %v, want ErrNotFound", err)
	}
	other := st
	other.Backend = "linux"
	if _, err := h.c.Resume(context.Background(), other); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("resume of a linux state: err = %v, want ErrInvalid", err)
	}
}

func TestUserSwitch(t *testing.T) {
	if os.Geteuid() != 0 {
		h := newHarness(t)
		_, err := h.c.Create(context.Background(), weaker(sandbox.Spec{User: strconv.Itoa(os.Geteuid() + 1)}))
		if !errors.Is(err, sandbox.ErrPolicyUnsupported) {
			t.Fatalf("another user without root: err = %v, want ErrPolicyUnsupported", err)
		}
		testenv.Skipf(t, "switching users needs root; checked the refusal only")
	}
	h := newHarness(t)
	s := h.create(t, weaker(sandbox.Spec{User: "1234:4321"}))
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "id -u; id -g; touch made-by-cmd"}})
	if err != nil || string(res.Stdout) != "1234\n4321\n" || res.ExitCode != 0 {
		t.Fatalf("id: %q %q %v", res.Stdout, res.Stderr, err)
	}
	if err := s.WriteFile(context.Background(), "d/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d", "d/f", "made-by-cmd"} {
		fi, err := os.Stat(filepath.Join(s.State().Workspace, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1234 || st.Gid != 4321 {
			t.Errorf("%s owned by %d:%d, want 1234:4321", p, st.Uid, st.Gid)
		}
	}
	res, err = sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "test -t 0 && id -u"}, TTY: true})
	if err != nil || !strings.Contains(string(res.Stdout), "1234") {
		t.Fatalf("TTY exec as another user: %q, %v", res.Stdout, err)
	}
}

func TestWorkdirMapping(t *testing.T) {
	h := newHarness(t)
	ws := t.TempDir()
	host := t.TempDir()
	s := h.create(t, weaker(sandbox.Spec{Workspace: ws}))
	tests := []struct {
		name    string
		workdir string
		want    string
		kind    error
	}{
		{"an empty workdir is the workspace", "", ws, nil},
		{"the sandbox workdir maps to the workspace", "/workspace", ws, nil},
		{"a relative workdir stays in the workspace", ".", ws, nil},
		{"a relative workdir climbing out is refused", "../..", "", sandbox.ErrPathEscape},
		{"an absolute host path is used as it is (nothing is confined)", host, host, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{Cmd: []string{"pwd"}, Workdir: tt.workdir})
			if tt.kind != nil {
				if !errors.Is(err, tt.kind) {
					t.Fatalf("err = %v, want %v", err, tt.kind)
				}
				return
			}
			if err != nil || strings.TrimSpace(string(res.Stdout)) != tt.want {
				t.Fatalf("pwd = %q, %v; want %s", res.Stdout, err, tt.want)
			}
		})
	}
}

// TestTimeoutReturnsEvenWhenAGrandchildEscapesTheGroup documents the
// limit of this backend: a setsid'ed grandchild survives the kill, but it
// cannot hold Exec hostage through the output pipes it inherited.
func TestTimeoutReturnsEvenWhenAGrandchildEscapesTheGroup(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		testenv.Skipf(t, "setsid(1) is not installed")
	}
	h := newHarness(t)
	s := h.create(t, weaker(sandbox.Spec{Workspace: t.TempDir()}))
	start := time.Now()
	res, err := sandbox.Exec(context.Background(), s, sandbox.ExecRequest{
		Cmd:     []string{"sh", "-c", "setsid sleep 30 & echo $! > escaped.pid; echo before; sleep 30"},
		Timeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || time.Since(start) > 5*time.Second {
		t.Fatalf("got %+v after %v", res.ExitStatus, time.Since(start))
	}
	if string(res.Stdout) != "before\n" {
		t.Errorf("output before the kill was lost: %q", res.Stdout)
	}
	b, _ := s.ReadFile(context.Background(), "escaped.pid")
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL) // clean up the escapee
	}
}
