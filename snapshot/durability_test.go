package snapshot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// childEnv makes the test binary a helper that saves a tree, reporting
// progress on stdout, so that a test can kill it with SIGKILL mid-save.
const childEnv = "AGENTBOX_SNAPSHOT_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "save" {
		os.Exit(childSave(os.Getenv("STORE"), os.Getenv("SRC")))
	}
	os.Exit(m.Run())
}

func childSave(store, src string) int {
	s, err := Open(store, Options{Logger: quietLogger()})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	info, err := s.SaveWithOptions(context.Background(), src, SaveOptions{Progress: func(done, total int64) {
		fmt.Printf("P %d %d\n", done, total)
	}})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Println("DONE", info.ID)
	return 0
}

// bigTree makes a tree of many small files and some 1 MiB ones.
func bigTree(t *testing.T, root string, small, large int) {
	t.Helper()
	var nodes []node
	for i := range small {
		nodes = append(nodes, node{path: fmt.Sprintf("src/d%02d/f%04d.txt", i%50, i), data: string(textData(uint64(i), 2000+i%3000))})
	}
	for i := range large {
		nodes = append(nodes, node{path: fmt.Sprintf("data/blob%03d.bin", i), data: string(randomData(uint64(1000+i), 1<<20))})
	}
	makeTree(t, root, nodes)
}

func TestAKilledSaveLeavesThePreviousSnapshotIntactAndNothingHalfVisible(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary and writes ~50 MiB per case")
	}
	storeDir := filepath.Join(t.TempDir(), "store")
	s, err := Open(storeDir, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	prev, err := s.Save(ctx(), workspace(t), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	bigTree(t, src, 2000, 48)
	tests := []struct {
		name string
		at   float64 // fraction of content bytes done when the child is killed
	}{
		{"killed early in the object writes", 0.2},
		{"killed late in the object writes", 0.8},
		{"killed while publishing", 1.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=save", "STORE="+storeDir, "SRC="+src)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) == 3 && f[0] == "P" {
					done, _ := strconv.ParseFloat(f[1], 64)
					total, _ := strconv.ParseFloat(f[2], 64)
					if total > 0 && done >= tt.at*total {
						cmd.Process.Signal(syscall.SIGKILL)
						killed = true
						break
					}
				}
			}
			go func() {
				for sc.Scan() {
				}
			}()
			cmd.Wait()
			if !killed {
				t.Fatal("the child finished before it could be killed")
			}
			if left, _ := os.ReadDir(filepath.Join(storeDir, "tmp")); tt.at < 1 && len(left) == 0 {
				t.Fatal("the killed save left no staging: it was not killed mid-write")
			}
			// Every snapshot listed is whole; the previous one is listed.
			s2, err := Open(storeDir, Options{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			list, err := s2.List(ctx())
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, info := range list {
				if err := s2.Verify(ctx(), info.ID); err != nil {
					t.Errorf("listed snapshot %s does not verify: %v", short(info.ID), err)
				}
				found = found || info.ID == prev
			}
			if !found {
				t.Fatalf("previous snapshot %s is no longer listed", short(prev))
			}
			if err := s2.Restore(ctx(), prev, filepath.Join(t.TempDir(), "r"), 0); err != nil {
				t.Errorf("previous snapshot does not restore: %v", err)
			}
			if left, _ := os.ReadDir(s2.tmpDir()); len(left) != 0 {
				t.Errorf("Open left the killed save's staging behind: %v", left)
			}
		})
	}
}

func TestAFullDiskFailsTheSaveCleanlyAndKeepsOldSnapshots(t *testing.T) {
	testenv.NeedRoot(t, "mounting a small tmpfs")
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=6m"); err != nil {
		testenv.Skipf(t, "cannot mount a tmpfs here (%v)", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	s, err := Open(filepath.Join(mnt, "store"), Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	small := t.TempDir()
	makeTree(t, small, []node{{path: "a.txt", data: "first snapshot"}})
	old, err := s.Save(ctx(), small, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	big := t.TempDir()
	bigTree(t, big, 10, 12) // 12 MiB of incompressible data on a 6 MiB disk
	start := time.Now()
	_, err = s.Save(ctx(), big, nil, 0)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save on a full disk: err = %v, want ENOSPC", err)
	}
	t.Logf("failed after %v with: %v", time.Since(start), err)
	if err := s.Verify(ctx(), old); err != nil {
		t.Errorf("old snapshot damaged: %v", err)
	}
	list, _ := s.List(ctx())
	if len(list) != 1 {
		t.Errorf("List = %d snapshots, want only the old one", len(list))
	}
	if left, _ := os.ReadDir(s.tmpDir()); len(left) != 0 {
		t.Errorf("the failed save left staging behind: %v", left)
	}
	if err := s.Restore(ctx(), old, filepath.Join(t.TempDir(), "r"), 0); err != nil {
		t.Errorf("old snapshot does not restore: %v", err)
	}
}

func TestOpenLeavesTheStagingOfASaveInProgressAlone(t *testing.T) {
	s := openStore(t, Limits{})
	src := t.TempDir()
	bigTree(t, src, 50, 4)
	opened := false
	_, err := s.SaveWithOptions(ctx(), src, SaveOptions{Progress: func(done, total int64) {
		if opened || done == 0 {
			return
		}
		opened = true
		// Another Open while this save runs must not clean its staging.
		if _, err := Open(s.Dir(), Options{Logger: quietLogger()}); err != nil {
			t.Error(err)
		}
		if left, _ := os.ReadDir(s.tmpDir()); len(left) != 1 {
			t.Errorf("staging of the running save: %v, want one directory", left)
		}
	}})
	if err != nil {
		t.Fatalf("save with a concurrent Open: %v", err)
	}
	if !opened {
		t.Fatal("progress was never reported mid-save")
	}
}

// A session's temporary workspace is a tmpfs of its own: the restore
// cannot stage beside it and rename across, so it stages inside.
func TestARestoreIntoAMountPointStagesOnItsFileSystem(t *testing.T) {
	testenv.NeedRoot(t, "mounting a tmpfs")
	s := openStore(t, Limits{})
	src := t.TempDir()
	makeTree(t, src, []node{{path: "output/report.txt", data: "balance 42"}, {path: "notes.md", data: "n"}})
	ref, err := s.Save(ctx(), src, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		testenv.Skipf(t, "cannot mount a tmpfs here (%v)", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	if err := s.Restore(ctx(), ref, mnt, 0); err != nil {
		t.Fatalf("restore into a mount point: %v", err)
	}
	if got, want := treeState(t, mnt), treeState(t, src); got != want {
		t.Errorf("restored tree:\n%s\nwant:\n%s", got, want)
	}
}
