package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procMem is what smaps_rollup says about one process.
type procMem struct {
	RSS, PSS int64
	// PSSAnon is the private part (heap, stacks, written data); PSSFile
	// the share of file pages (the binary's text, libraries).
	PSSAnon, PSSFile int64
}

// parseRollup reads the Rss and Pss lines of a smaps_rollup file (kB).
func parseRollup(text string) (procMem, error) {
	var m procMem
	var seen int
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var dst *int64
		switch f[0] {
		case "Rss:":
			dst = &m.RSS
		case "Pss:":
			dst = &m.PSS
		case "Pss_Anon:":
			dst = &m.PSSAnon
		case "Pss_File:":
			dst = &m.PSSFile
		default:
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return procMem{}, fmt.Errorf("parse %q: %w", line, err)
		}
		*dst = n << 10
		if f[0] == "Rss:" || f[0] == "Pss:" {
			seen++
		}
	}
	if seen != 2 {
		return procMem{}, fmt.Errorf("no Rss and Pss lines in smaps_rollup")
	}
	return m, nil
}

func (m *procMem) add(o procMem) {
	m.RSS += o.RSS
	m.PSS += o.PSS
	m.PSSAnon += o.PSSAnon
	m.PSSFile += o.PSSFile
}

// memOf reads the memory of one process from /proc.
func memOf(proc string, pid int) (procMem, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		return procMem{}, fmt.Errorf("read smaps_rollup of pid %d: %w", pid, err)
	}
	m, err := parseRollup(string(b))
	if err != nil {
		return procMem{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return m, nil
}

// parentOf reads the parent pid from a /proc/PID/stat line; the command
// name in parentheses may itself hold spaces and parentheses.
func parentOf(stat string) (int, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("short stat %q", stat)
	}
	return strconv.Atoi(f[1])
}

// tree lists root and all its descendants, as the host's /proc shows them.
func tree(proc string, root int) ([]int, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", proc, err)
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		ppid, err := parentOf(string(b))
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], pid)
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// treeMem sums the memory of root and its descendants and names them.
func treeMem(proc string, root int) (procMem, []string, error) {
	pids, err := tree(proc, root)
	if err != nil {
		return procMem{}, nil, err
	}
	var sum procMem
	var names []string
	for _, pid := range pids {
		m, err := memOf(proc, pid)
		if err != nil {
			return procMem{}, nil, err
		}
		sum.add(m)
		comm, _ := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cmdline"))
		name := strings.ReplaceAll(strings.TrimRight(string(comm), "\x00"), "\x00", " ")
		names = append(names, fmt.Sprintf("%d %s (PSS %s)", pid, name, mib(m.PSS)))
	}
	return sum, names, nil
}
