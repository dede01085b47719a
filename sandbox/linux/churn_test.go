package linux

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"github.com/agentbox/agentbox/sandbox/linux/internal/asnobody"
)

// newChurnClient is a client with its own state directory, as root or,
// in the rerun as nobody (TestCreateChurnRootless), rootless; its session
// ids are recorded in *ids.
func newChurnClient(t *testing.T, ids *[]string) *Client {
	t.Helper()
	var c *Client
	if asnobody.Child() {
		var err error
		if c, err = New(Options{StateDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
			t.Fatal(err)
		}
	} else {
		c = newTestClientWith(t, Options{StateDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	var mu sync.Mutex
	c.newID = func() string {
		id := newID()
		mu.Lock()
		*ids = append(*ids, id)
		mu.Unlock()
		return id
	}
	return c
}

// createExecClose makes a session, runs true in it and closes it.
func createExecClose(c *Client) error {
	ctx := context.Background()
	s, err := c.Create(ctx, sandbox.Spec{})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	_, xerr := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: []string{"true"}})
	if err := s.Close(ctx); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if xerr != nil {
		return fmt.Errorf("exec: %w", xerr)
	}
	return nil
}

// TestCreateWhateverDescriptorsTheClientHasOpen: a session starts
// whatever descriptors the client process has open. Before it execs, the
// child that becomes the init moves descriptors it must keep (the pipe
// its start reports errors on, when that is below the highest descriptor
// it is given) to the numbers just above the highest one it is given; the
// client held the init program at 64 and the child exec'd it from there,
// so when the highest was 63 the exec found a pipe and failed ("start
// init /proc/self/fd/64: permission denied"). Concurrent creates, opening
// and closing descriptors, made that happen at random; here two
// descriptors are closed just before the start, as another goroutine
// would, and the descriptors in use are raised one by one past 64.
func TestCreateWhateverDescriptorsTheClientHasOpen(t *testing.T) {
	var ids []string
	c := newChurnClient(t, &ids)
	var held, holes []*os.File
	defer func() { closeAll(held); closeAll(holes) }()
	c.beforeInitStart = func() {
		closeAll(holes)
		holes = nil
	}
	open := func() *os.File {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for {
		f := open()
		held = append(held, f)
		if f.Fd() > 80 {
			break
		}
		holes = append(holes, open(), open())
		if err := createExecClose(c); err != nil {
			t.Fatalf("with descriptors open up to %d: %v", f.Fd(), err)
		}
	}
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// TestCreateCloseChurn runs 8 clients' worth of sessions at once (8
// goroutines making, using and closing 50 sessions each, as agentbox
// serve does for 8 busy clients), then checks that none failed and that
// none left anything behind: an init, a cgroup, a mount, a directory, an
// id slot, or a descriptor in the client.
func TestCreateCloseChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping 400 sessions")
	}
	var ids []string
	c := newChurnClient(t, &ids)
	// One session first, so that what a client opens once (and keeps)
	// is not counted as a leak.
	if err := createExecClose(c); err != nil {
		t.Fatal(err)
	}
	fds := openFDs(t)
	const workers, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := createExecClose(c); err != nil {
					errs <- fmt.Errorf("worker %d, session %d: %w", w, i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 10 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d sessions failed", failed, workers*each)
	}

	if entries := sessionEntries(c.opts.StateDir); len(entries) > 0 {
		t.Errorf("state directory not empty after the churn: %v", names(entries))
	}
	mine := regexp.MustCompile(`\bid=(` + strings.Join(ids, "|") + `)\b`)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if cmd := strings.ReplaceAll(readFile(p), "\x00", " "); mine.MatchString(cmd) {
			t.Errorf("an init outlived its session: %s: %s", filepath.Dir(p), cmd)
		}
	}
	for _, line := range strings.Split(readFile("/proc/self/mountinfo"), "\n") {
		if strings.Contains(line, c.opts.StateDir) {
			t.Errorf("mount left behind: %s", line)
		}
	}
	for _, id := range ids {
		g := c.cg.Open(id)
		for _, h := range []string{"v2", cgroups.Memory, cgroups.Pids, cgroups.CPU} {
			if d := g.Dir(h); d != "" {
				if _, err := os.Stat(d); err == nil {
					t.Errorf("cgroup %s left behind", d)
				}
			}
		}
	}
	if !c.rootless {
		slots, _ := os.ReadDir(c.slots.dir)
		for _, e := range slots {
			if strings.HasPrefix(readFile(filepath.Join(c.slots.dir, e.Name())), c.opts.StateDir+"/") {
				t.Errorf("id slot %s still taken", e.Name())
			}
		}
	}
	if after := openFDs(t); len(after) > len(fds) {
		t.Errorf("the client holds %d descriptors more after the churn: %v, before %v", len(after)-len(fds), after, fds)
	}
}

// openFDs lists this process's descriptors and what they are.
func openFDs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		out = append(out, e.Name()+"->"+target)
	}
	return out
}

// TestCreateChurnRootless reruns the two tests above as nobody, with
// rootless sessions.
func TestCreateChurnRootless(t *testing.T) {
	if asnobody.Child() {
		t.Skip("this is the rootless run") // not reached: the child run is given -test.run
	}
	testenv.NeedRoot(t, "rerunning the churn as nobody")
	args := []string{"-test.v", "-test.count=1", "-test.timeout=10m", "-test.run", "^(TestCreateWhateverDescriptorsTheClientHasOpen|TestCreateCloseChurn)$"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	log, err := asnobody.Run(t, args, nil)
	if err != nil || !strings.Contains(log, "--- PASS: TestCreateWhateverDescriptorsTheClientHasOpen") {
		t.Fatalf("the churn as nobody failed (%v):\n%s", err, log)
	}
}
