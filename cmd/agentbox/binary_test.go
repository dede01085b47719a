package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The CLI's commands are tested end to end: the programs are built once,
// as a set in one directory (agentbox forwards to the agentbox-full
// beside it, and the native backend starts the agentbox-init beside it),
// and run as subprocesses. AGENTBOX_BIN names a prebuilt agentbox, with
// its set beside it, to use instead (CI builds them once for every suite).
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	builtDir  string // what agentboxBinary built into; TestMain removes it
)

// exitCode is the status agentbox itself fails with (cli.ExitFailure).
const exitCode = 125

// programs are the programs of the set, by their cmd/ directory.
var programs = []string{"agentbox", "agentbox-full", "agentbox-init"}

func agentboxBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("AGENTBOX_BIN"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "agentbox-cli-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtDir = dir
		binPath = filepath.Join(dir, "agentbox")
		if out, err := buildPrograms(dir); err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build agentbox: %v\n%s", buildErr, binPath)
	}
	return binPath
}

// buildPrograms builds the set into dir, which it makes private (the
// forward and the init are refused from a directory others can write).
func buildPrograms(dir string) ([]byte, error) {
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"build", "-o", dir + "/"}
	for _, p := range programs {
		args = append(args, "github.com/agentbox/agentbox/cmd/"+p)
	}
	return exec.Command("go", args...).CombinedOutput()
}

// run runs bin with args and returns its stdout, stderr and exit status.
func run(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run %s: %v", bin, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// execResult is what agentbox exec --json prints.
type execResult struct {
	ExitCode        int      `json:"exit_code"`
	Signal          string   `json:"signal"`
	Stdout          string   `json:"stdout"`
	Stderr          string   `json:"stderr"`
	DurationMS      int64    `json:"duration_ms"`
	TimedOut        bool     `json:"timed_out"`
	OOMKilled       bool     `json:"oom_killed"`
	OutputTruncated bool     `json:"output_truncated"`
	Violations      []string `json:"violations"`
	Snapshot        string   `json:"snapshot"`
}
