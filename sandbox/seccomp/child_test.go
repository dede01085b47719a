//go:build linux

package seccomp

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

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
		// Replace the child by a program, as a command started from the
		// filtered thread is.
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
	case "attacks":
		return childAttacks()
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}

// childThreads starts goroutines pinned to fresh OS threads after
// Install, then checks that the calling thread alone runs in filter mode:
// the runtime clones new threads from its template thread, never from a
// locked one, so none inherits the filter.
func childThreads() int {
	self := unix.Gettid()
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
		caller := filepath.Base(filepath.Dir(status)) == strconv.Itoa(self)
		if filtered := strings.Contains(string(b), "\nSeccomp:\t2\n"); filtered != caller {
			fmt.Fprintf(os.Stderr, "%s (caller %v) has filter mode %v:\n%s", status, caller, filtered, b)
			return 7
		}
		if caller && !strings.Contains(string(b), "\nNoNewPrivs:\t1\n") {
			fmt.Fprintf(os.Stderr, "%s lacks no_new_privs:\n%s", status, b)
			return 7
		}
	}
	close(release)
	wg.Wait()
	fmt.Println("only the calling thread is filtered, of", len(tasks))
	return 0
}

// childAttacks tries attacks on real targets and prints name=errno lines:
// ptrace-attaching a sibling process and pushing a byte into a real
// terminal's input with TIOCSTI.
func childAttacks() int {
	victim := exec.Command("sleep", "10")
	if err := victim.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start victim:", err)
		return 8
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	err := unix.PtraceAttach(victim.Process.Pid)
	fmt.Printf("ptrace-attach=%d\n", errnoOf(err))

	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open ptmx:", err)
		return 8
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		fmt.Fprintln(os.Stderr, "unlock pty:", err)
		return 8
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pty number:", err)
		return 8
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open pts:", err)
		return 8
	}
	defer tty.Close()
	c := byte('x')
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, tty.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	fmt.Printf("tiocsti=%d\n", int(errno))
	return 0
}

func errnoOf(err error) int {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return int(errno)
	}
	return 0
}

// childExit runs the test binary in mode with the filter and returns its
// combined output and exit code, for programs expected to fail.
func childExit(t *testing.T, mode string, args ...string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childFilterEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("child %s %v: %v", mode, args, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
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
