//go:build linux && (amd64 || arm64)

package seccomp

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// The live tests re-execute the test binary: the child installs the filter
// (or not, for the control run), does its work and reports on stdout. A
// filter can never be removed, so it must not be installed in the test
// process itself.
const (
	childEnv       = "AGENTBOX_SECCOMP_TEST_CHILD"
	childFilterEnv = "AGENTBOX_SECCOMP_TEST_FILTER"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// childMain runs in the re-executed test binary.
func childMain(mode string, args []string) int {
	filtered := os.Getenv(childFilterEnv) == "1"
	if filtered {
		if err := Install(); err != nil {
			fmt.Fprintln(os.Stderr, "install:", err)
			return 3
		}
	}
	switch mode {
	case "probe":
		// Try every probe and print name -> errno as JSON.
		res := map[string]int{}
		for _, p := range probes() {
			if p.noControl && !filtered {
				continue // never run it for real
			}
			_, _, errno := unix.Syscall6(p.nr, p.args[0], p.args[1], p.args[2], p.args[3], p.args[4], p.args[5])
			res[p.name] = int(errno)
		}
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			return 4
		}
		return 0
	case "exec":
		// Replace the child by a program, as the backend's exec stage does.
		path, err := exec.LookPath(args[0])
		if err == nil {
			err = unix.Exec(path, args, os.Environ())
		}
		fmt.Fprintln(os.Stderr, "exec:", err)
		return 5
	case "osexec":
		// Start a program the way a Go session init would, after Install.
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		os.Stdout.Write(out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "os/exec:", err)
			return 5
		}
		return 0
	case "threads":
		return childThreads()
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}

// childThreads starts goroutines pinned to fresh OS threads, then checks
// that every thread of the process, old and new, runs in filter mode.
func childThreads() int {
	var wg sync.WaitGroup
	started := make(chan struct{})
	release := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // keep this thread; never unlock, so it dies with the goroutine
			started <- struct{}{}
			<-release
		}()
	}
	for range 8 {
		<-started
	}
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) < 9 {
		fmt.Fprintln(os.Stderr, "threads: found", len(tasks), "tasks:", err)
		return 6
	}
	for _, status := range tasks {
		b, err := os.ReadFile(status)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 6
		}
		if !strings.Contains(string(b), "\nSeccomp:\t2\n") || !strings.Contains(string(b), "\nNoNewPrivs:\t1\n") {
			fmt.Fprintf(os.Stderr, "%s is not filtered:\n%s", status, b)
			return 7
		}
	}
	close(release)
	wg.Wait()
	fmt.Println("threads filtered:", len(tasks))
	return 0
}

// child runs the test binary in mode with or without the filter and
// returns its stdout; a non-zero exit fails the test.
func child(t *testing.T, mode string, filter bool, args ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childFilterEnv+"=0")
	if filter {
		cmd.Env[len(cmd.Env)-1] = childFilterEnv + "=1"
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s (filter=%v) %v: %v\nstdout: %s\nstderr: %s", mode, filter, args, err, out, stderr.String())
	}
	return string(out)
}
