package linux

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// standardPath is the search path every session starts from.
const standardPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// sandboxPath is a session's PATH, built from what the sandbox can see:
// the standard directories, then the bin directory of each toolchain
// installed one level under /usr/local (bound from the host: Go's
// tarball is /usr/local/go/bin) and of each mount that has one
// (--ro ./node:/opt/node gives /opt/node/bin). hostRoot is where the
// host's /usr is read (the host's "/" but in tests).
func sandboxPath(hostRoot string, mounts []sandbox.Mount) string {
	dirs := strings.Split(standardPath, ":")
	seen := map[string]bool{}
	for _, d := range dirs {
		seen[d] = true
	}
	add := func(sandboxDir, hostDir string) {
		if seen[sandboxDir] {
			return
		}
		// Lstat: a bin that is a link could lead anywhere; a toolchain's
		// is a directory.
		if fi, err := os.Lstat(hostDir); err == nil && fi.IsDir() {
			seen[sandboxDir] = true
			dirs = append(dirs, sandboxDir)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(hostRoot, "usr", "local")); err == nil {
		for _, e := range entries { // sorted by name
			if e.IsDir() {
				add(path.Join("/usr/local", e.Name(), "bin"), filepath.Join(hostRoot, "usr", "local", e.Name(), "bin"))
			}
		}
	}
	for _, m := range mounts {
		add(path.Join(path.Clean(m.Target), "bin"), filepath.Join(m.Source, "bin"))
	}
	return strings.Join(dirs, ":")
}
