package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ownerLabel marks a session that one `agentbox exec` makes for itself and
// always closes: its value is that process's pid. A session whose owner is
// gone (killed before it could close it) is an orphan, which `agentbox gc`
// removes; sessions made through the library have no owner and are left.
const ownerLabel = "agentbox.exec-owner"

func ownerMark() string { return strconv.Itoa(os.Getpid()) }

// ownerAlive reports whether mark names a running agentbox process. A pid
// reused by another program counts as gone; one reused by another agentbox
// counts as alive (the safe side: the session is kept).
func ownerAlive(mark string) bool {
	pid, err := strconv.Atoi(mark)
	if err != nil || pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return strings.HasPrefix(filepath.Base(string(argv0)), "agentbox")
}
