package linux

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"
)

// A detached session whose state directory is removed from under it runs
// on, out of sight of its state: Remains finds its init, its workspace
// mount and its cgroups from the host, and ending them leaves nothing;
// a live session beside it, with its state, is not listed and runs on.
func TestRemainsOfASessionWhoseStateDirectoryIsGoneAreFoundAndEnded(t *testing.T) {
	c := newTestClient(t)
	tests := []struct {
		name string
		spec sandbox.Spec
	}{
		{"a tmpfs workspace", sandbox.Spec{Detached: true}},
		{"a disk image workspace", sandbox.Spec{Detached: true, Policy: sandbox.Policy{Resources: sandbox.Resources{DiskBytes: 16 << 20}}}},
	}
	kept := newTestSession(t, c, sandbox.Spec{Detached: true})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.spec.Policy.Resources.DiskBytes > 0 && !hasPart(c, sandbox.PartDisk) {
				testenv.Skipf(t, "no mkfs.ext4 or loop devices on this host")
			}
			s, err := c.Create(context.Background(), tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			if _, err := s.Start(context.Background(), sandbox.ExecRequest{Cmd: []string{"sleep", "300"}}); err != nil {
				t.Fatal(err)
			}
			id, ws, h := s.ID(), s.State().Workspace, mustHandles(t, s.State())
			var loop string
			if h.DiskImage != "" {
				loop = loopOf(t, ws)
			}
			if err := os.RemoveAll(c.sessionDir(id)); err != nil {
				t.Fatal(err)
			}

			remains, err := c.Remains()
			if err != nil {
				t.Fatal(err)
			}
			var what []string
			for _, r := range remains {
				switch r.Session {
				case kept.ID():
					t.Errorf("the live session with its state is listed: %s: %s", r.What, r.Why)
				case id:
					what = append(what, r.What)
				}
			}
			kinds := []string{"init pid", "workspace mount " + ws, "cgroup"}
			if len(what) != len(kinds) {
				t.Fatalf("the remains of session %s are %q; want its init, workspace mount and cgroups", id, what)
			}
			for i, k := range kinds {
				if !strings.HasPrefix(what[i], k) {
					t.Fatalf("the remains of session %s are %q; want %q, in that order", id, what, kinds)
				}
			}
			if !initAlive(h.InitPID, id) || !mounted(ws) {
				t.Fatal("listing the remains ended something")
			}
			for _, r := range remains {
				if r.Session == id {
					if err := r.End(); err != nil {
						t.Error(err)
					}
				}
			}
			if initAlive(h.InitPID, id) {
				t.Error("its init still runs")
			}
			if mounted(ws) {
				t.Errorf("its workspace %s is still mounted", ws)
			}
			if loop != "" && loopBacking(loop) == h.DiskImage {
				t.Errorf("its loop device %s is still attached to %s", loop, h.DiskImage)
			}
			g := c.cg.Open(id)
			for _, hier := range []string{"v2", cgroups.Memory, cgroups.Pids, cgroups.CPU} {
				if d := g.Dir(hier); d != "" && dirExists(d) {
					t.Errorf("its cgroup %s is still there", d)
				}
			}
			if again, err := c.Remains(); err != nil || slices.ContainsFunc(again, func(r Remain) bool { return r.Session == id }) {
				t.Errorf("after End, Remains = %v, %v; want none of session %s", again, err, id)
			}
			if res := run(t, kept, "echo", "here"); string(res.Stdout) != "here\n" || !mounted(kept.State().Workspace) {
				t.Errorf("the live session beside it: %q, workspace mounted %v", res.Stdout, mounted(kept.State().Workspace))
			}
		})
	}
}

// loopOf is the loop device mounted on dir.
func loopOf(t *testing.T, dir string) string {
	t.Helper()
	mounts, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.point == dir && strings.HasPrefix(m.source, "/dev/loop") {
			return m.source
		}
	}
	t.Fatalf("no loop device mounted on %s", dir)
	return ""
}

// An init tells whose it is by its arguments and environment alone: the
// state directory (any path) and mount namespace round-trip through the
// environment, and the arguments, which the sandbox reads at
// /proc/1/cmdline, do not name the host's path; an init started with
// them in its arguments is still read.
func TestInitArgumentsNameTheStateDirectory(t *testing.T) {
	in := control.Args{ID: "abc", Tracking: "v2", Join: 2, StateDir: "/tmp/a dir/with=signs", MountNS: 4026531841}
	if argv := strings.Join(in.Argv(), " "); strings.Contains(argv, in.StateDir) {
		t.Errorf("the init's arguments name its state directory: %s", argv)
	}
	out, err := control.ParseArgs(in.Argv())
	if err == nil {
		err = out.ReadEnv(append([]string{"GOGC=50"}, in.Env()...))
	}
	if err != nil || out != in {
		t.Fatalf("ParseArgs(%q) and ReadEnv(%q) = %+v, %v; want %+v", in.Argv(), in.Env(), out, err, in)
	}
	before := []string{"id=abc", "track=v2", "join=2", "state=" + in.StateDir, "mntns=4026531841"}
	if out, err := control.ParseArgs(before); err != nil || out != in {
		t.Fatalf("ParseArgs(%q) = %+v, %v; want %+v", before, out, err, in)
	}
}

func TestMountinfoPathsAreUnescaped(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mountinfo")
	line := `36 35 0:31 / /tmp/a\040b/x\134y.workspace rw,relatime shared:1 - tmpfs agentbox-workspace rw,size=2097152k` + "\n"
	if err := os.WriteFile(p, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := readMountinfo(p)
	if err != nil || len(m) != 1 {
		t.Fatalf("readMountinfo = %v, %v", m, err)
	}
	want := hostMount{dev: "0:31", point: `/tmp/a b/x\y.workspace`, fstype: "tmpfs", source: "agentbox-workspace"}
	if m[0] != want {
		t.Errorf("got %+v, want %+v", m[0], want)
	}
}

// A session rebuilt on the workspace of a gone one mounts it at the gone
// session's path, whose session directory Rebuild removed: that mount is
// the live session's, not a remain, and stays the stopped session's while
// its state names it.
func TestRemainsSpareTheWorkspaceARebuiltSessionAdopted(t *testing.T) {
	c := newTestClient(t)
	s, err := c.Create(context.Background(), sandbox.Spec{Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	st := s.State()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2, err := c.Rebuild(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close(context.Background()) })
	if _, err := os.Stat(c.sessionDir(st.ID)); !os.IsNotExist(err) || !mounted(st.Workspace) {
		t.Fatalf("the test needs the gone session's directory removed (%v) and its workspace mounted (%v)", err, mounted(st.Workspace))
	}
	for _, stopped := range []bool{false, true} {
		if stopped {
			if err := s2.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		remains, err := c.Remains()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range remains {
			if r.Session == st.ID || r.Session == s2.ID() {
				t.Errorf("rebuilt session stopped %v: listed %s of session %s: %s", stopped, r.What, r.Session, r.Why)
			}
		}
	}
}

func TestARemainNotListedByRemainsIsRefused(t *testing.T) {
	if err := (Remain{Session: "x", What: "cgroup /nowhere"}).End(); err == nil {
		t.Fatal("End of a Remain that Remains did not make succeeded")
	}
}

// Rebuild removes the gone session's directory before its new session's
// directory exists; in between no state names the workspace it adopts.
// gc's End of that workspace waits for the rebuild (the directory's
// lock) and then finds it claimed: it is not unmounted under the
// session being made.
func TestRemainsDoNotUnmountAWorkspaceARebuildIsAdopting(t *testing.T) {
	c := newTestClient(t)
	ctx := context.Background()
	s, err := c.Create(ctx, sandbox.Spec{Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	st := s.State()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	ws := st.Workspace
	t.Cleanup(func() {
		_ = unix.Unmount(ws, unix.MNT_DETACH)
		_ = os.RemoveAll(ws)
	})
	// What Rebuild does up to the directory of its new session, by hand.
	unlock, err := lockDir(filepath.Dir(ws), unix.LOCK_SH)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	keep := st
	keep.OwnsWorkspace = false
	if err := c.Delete(ctx, keep); err != nil {
		t.Fatal(err)
	}
	remains, err := c.Remains()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(remains, func(r Remain) bool {
		return r.Session == st.ID && strings.HasPrefix(r.What, "workspace mount")
	})
	if i < 0 || !mounted(ws) {
		t.Fatalf("the test needs the unclaimed workspace listed (%v) and mounted (%v)", remains, mounted(ws))
	}
	done := make(chan error, 1)
	go func() { done <- remains[i].End() }()
	select {
	case err := <-done:
		t.Fatalf("End did not wait for the rebuild: %v; mounted: %v", err, mounted(ws))
	case <-time.After(300 * time.Millisecond):
	}
	dir := c.sessionDir(newID())
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	unlock()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "claimed") {
		t.Errorf("End once the rebuild made its directory = %v; want it refused as claimed", err)
	}
	if !mounted(ws) {
		t.Error("the adopted workspace was unmounted")
	}
}

// Removing a cgroup kills what is in it. A group listed empty is not
// removed, nor its processes killed, when a process is in it by End.
func TestRemainsDoNotRemoveAGroupAProcessEntered(t *testing.T) {
	c := newTestClient(t)
	id := newID()
	g, err := c.cg.Create(id, cgroups.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Remove() })
	old := time.Now().Add(-2 * groupGrace)
	for _, h := range []string{"v2", cgroups.Memory, cgroups.Pids, cgroups.CPU} {
		if d := g.Dir(h); d != "" {
			if err := os.Chtimes(d, old, old); err != nil {
				testenv.Skipf(t, "cannot age cgroup %s: %v", d, err)
			}
		}
	}
	remains, err := c.Remains()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(remains, func(r Remain) bool { return r.Session == id })
	if i < 0 {
		t.Fatalf("the empty, old group of no init is not listed: %v", remains)
	}
	sleep := exec.Command("sleep", "300")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	if err := g.Add(sleep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := remains[i].End(); err == nil || !strings.Contains(err.Error(), "processes are in it") {
		t.Errorf("End of a group a process entered = %v; want it refused", err)
	}
	if err := sleep.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process in the group was killed: %v", err)
	}
}
