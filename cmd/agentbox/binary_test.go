package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The CLI's commands are tested end to end: the agentbox binary is built once
// and run as a subprocess, because the linux backend re-executes it as the
// sandbox init (a test binary cannot play that part). AGENTBOX_BIN names
// a prebuilt binary to use instead.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	builtDir  string // what agentboxBinary built into; TestMain removes it
)

func agentboxBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("AGENTBOX_BIN"); p != "" {
			binPath = p // CI builds the binary once for every suite
			return
		}
		dir, err := os.MkdirTemp("", "agentbox-run-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtDir = dir
		binPath = filepath.Join(dir, "agentbox")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build agentbox: %v\n%s", buildErr, binPath)
	}
	return binPath
}
