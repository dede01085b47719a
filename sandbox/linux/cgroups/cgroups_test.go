package cgroups

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

func host(t *testing.T) *Host {
	t.Helper()
	testenv.NeedRoot(t, "creating cgroups")
	h, err := Detect()
	testenv.NeedKernel(t, "cgroup v2", err)
	return h
}

func TestCreateWritesEveryRequestedLimit(t *testing.T) {
	h := host(t)
	for _, c := range []string{Memory, Pids, CPU} {
		if h.Where(c) == "" {
			testenv.Skipf(t, "no %s controller here", c)
		}
	}
	g, err := h.Create("test-limits", Limits{MemoryBytes: 64 << 20, Pids: 17, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	got := strings.Join(g.Enforced(), "; ")
	for _, want := range []string{"memory", "pids", "cpu"} {
		if !strings.Contains(got, want) {
			t.Errorf("Enforced() = %q, lacks %s", got, want)
		}
	}
	pidsDir := g.Dir(Pids)
	if h.Where(Pids) == "v2" {
		pidsDir = g.Dir("v2")
	}
	if b, _ := os.ReadFile(filepath.Join(pidsDir, "pids.max")); strings.TrimSpace(string(b)) != "17" {
		t.Errorf("pids.max = %q, want 17", b)
	}
}

func TestRemoveKillsMembersAndDeletesTheGroups(t *testing.T) {
	h := host(t)
	g, err := h.Create("test-remove", Limits{Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if g.Empty() {
		t.Fatal("group is empty after Add")
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if cmd.ProcessState == nil || cmd.ProcessState.Success() {
		t.Errorf("member was not killed: %v", cmd.ProcessState)
	}
	for _, key := range []string{"v2", Memory, Pids, CPU} {
		if d := g.Dir(key); d != "" {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still exists after Remove", d)
			}
		}
	}
	if err := g.Remove(); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

func TestCreateRefusesBadNames(t *testing.T) {
	h := host(t)
	for _, name := range []string{"", "../x", "a/b", "."} {
		if _, err := h.Create(name, Limits{}); err == nil {
			t.Errorf("Create(%q) succeeded", name)
		}
	}
}

func TestThreadMoveCostIsNamedUnlessAHierarchyFavorsDynamicMoves(t *testing.T) {
	const hybrid = `31 25 0:27 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/pids rw,relatime shared:10 - cgroup cgroup rw,pids
33 25 0:29 / /sys/fs/cgroup/unified rw,relatime shared:11 - cgroup2 cgroup2 rw%s
`
	for _, tc := range []struct {
		name, v2opts string
		favor        bool
	}{
		{"plain hybrid host", "", false},
		{"cgroup2 mounted with favordynmods", ",favordynmods", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := parseMountinfo(strings.NewReader(fmt.Sprintf(hybrid, tc.v2opts)))
			if err != nil {
				t.Fatal(err)
			}
			if h.V1[Memory] != "/sys/fs/cgroup/memory" || h.V1[Pids] != "/sys/fs/cgroup/pids" || h.V2 != "/sys/fs/cgroup/unified" {
				t.Fatalf("hierarchies = %+v", h)
			}
			if h.FavorDynMods != tc.favor {
				t.Errorf("FavorDynMods = %v, want %v", h.FavorDynMods, tc.favor)
			}
			if cost := h.ThreadMoveCost(); (cost != "") == tc.favor {
				t.Errorf("ThreadMoveCost() = %q", cost)
			}
		})
	}
	v2 := &Host{V2: "/sys/fs/cgroup", V2Controllers: []string{Memory, Pids, CPU}, V1: map[string]string{}}
	if cost := v2.ThreadMoveCost(); cost != "" {
		t.Errorf("a cgroup2 host: ThreadMoveCost() = %q, want none (sessions are born in their group)", cost)
	}
}
