package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// memoryFile is the file that holds the current memory charge of the
// session id whose init is pid: memory.usage_in_bytes of its cgroup v1
// memory group, else memory.current of its cgroup2 group. The charge
// covers what the kernel accounts to the sandbox (its processes' pages,
// its tmpfs files, kernel memory), which PSS alone does not. With cgroup
// v1 the init may put only one of its threads (the one that forks
// commands) into the session's groups, so every thread is looked at and
// the group named after the session wins.
func memoryFile(pid int, id string) (string, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return "", fmt.Errorf("list the threads of pid %d: %w", pid, err)
	}
	var first string
	for _, t := range tasks {
		cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", t.Name(), "cgroup"))
		if err != nil {
			continue
		}
		f, err := memoryFileFrom(string(cg), string(mi))
		if err != nil {
			continue
		}
		if strings.Contains(f, "/"+id+"/") {
			return f, nil
		}
		if first == "" {
			first = f
		}
	}
	return "", fmt.Errorf("no thread of pid %d is in a memory cgroup named after session %s (the first is in %s)", pid, id, first)
}

// memoryFileFrom is memoryFile on the texts of /proc/PID/cgroup and
// /proc/self/mountinfo.
func memoryFileFrom(cgroup, mountinfo string) (string, error) {
	var v1Path, v2Path string
	hasV2 := false
	for _, line := range strings.Split(cgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path, hasV2 = parts[2], true
		} else if slices.Contains(strings.Split(parts[1], ","), "memory") {
			v1Path = parts[2]
		}
	}
	var v1Mount, v2Mount string
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || pf[3] != "/" {
			continue // only mounts of a hierarchy's root
		}
		switch {
		case qf[0] == "cgroup2":
			v2Mount = pf[4]
		case qf[0] == "cgroup" && slices.Contains(strings.Split(qf[2], ","), "memory"):
			v1Mount = pf[4]
		}
	}
	switch {
	case v1Path != "" && v1Mount != "":
		return filepath.Join(v1Mount, v1Path, "memory.usage_in_bytes"), nil
	case hasV2 && v2Mount != "":
		return filepath.Join(v2Mount, v2Path, "memory.current"), nil
	}
	return "", fmt.Errorf("no mounted memory cgroup for the process")
}

// readBytes reads a cgroup file that holds one number.
func readBytes(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// selfRSS is this process's resident set, from /proc/self/status.
func selfRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}
