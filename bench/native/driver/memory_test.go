package main

import (
	"slices"
	"testing"
)

func TestParseRollup(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    procMem
		wantErr bool
	}{
		{"rss and pss are read in kB", "55d0 [rollup]\nRss:  2048 kB\nPss:  1024 kB\nPss_Anon:  3 kB\nPss_File:  5 kB\n", procMem{RSS: 2 << 20, PSS: 1 << 20, PSSAnon: 3 << 10, PSSFile: 5 << 10}, false},
		{"a file without pss is an error", "Rss: 10 kB\n", procMem{}, true},
		{"a malformed number is an error", "Rss: x kB\nPss: 1 kB\n", procMem{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRollup(tt.text)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseRollup = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParentOf(t *testing.T) {
	tests := []struct {
		name string
		stat string
		want int
	}{
		{"a plain command name", "42 (sh) S 7 42 42 0", 7},
		{"a command name with spaces and parentheses", "42 (a (b) c) S 9 42 42 0", 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := parentOf(tt.stat); err != nil || got != tt.want {
				t.Errorf("parentOf(%q) = %d, %v; want %d", tt.stat, got, err, tt.want)
			}
		})
	}
}

func TestTreeMemSumsARootAndItsDescendantsOnly(t *testing.T) {
	m, names, err := treeMem("testdata/proc", 20)
	if err != nil {
		t.Fatal(err)
	}
	if want := (procMem{RSS: (200 + 210) << 10, PSS: (20 + 21) << 10, PSSAnon: 2 << 10}); m != want {
		t.Errorf("treeMem = %+v, want %+v", m, want)
	}
	if len(names) != 2 {
		t.Errorf("names = %q, want the root and its one child", names)
	}
	pids, _ := tree("testdata/proc", 1)
	slices.Sort(pids)
	if !slices.Equal(pids, []int{1, 20, 21, 30}) {
		t.Errorf("tree(1) = %v, want every process", pids)
	}
}

func TestMemoryFileFrom(t *testing.T) {
	const v1Mounts = "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
	const hybrid = v1Mounts + "40 30 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
	const v2 = "29 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
	tests := []struct {
		name, cgroup, mountinfo, want string
	}{
		{"a v1 memory group is read from the memory hierarchy", "8:pids:/agentbox/x\n4:memory:/agentbox/x\n0::/agentbox/x\n", hybrid, "/sys/fs/cgroup/memory/agentbox/x/memory.usage_in_bytes"},
		{"a pure v2 host reads memory.current", "0::/agentbox/x\n", v2, "/sys/fs/cgroup/agentbox/x/memory.current"},
		{"a co-mounted v1 controller list is understood", "4:cpu,memory:/a\n", "34 30 0:31 / /cg rw - cgroup cgroup rw,cpu,memory\n", "/cg/a/memory.usage_in_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := memoryFileFrom(tt.cgroup, tt.mountinfo)
			if err != nil || got != tt.want {
				t.Errorf("memoryFileFrom = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := memoryFileFrom("4:memory:/a\n", ""); err == nil {
		t.Error("no cgroup mounts: no error")
	}
}
