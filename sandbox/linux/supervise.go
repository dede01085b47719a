package linux

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"
)

// initChild is an init this process started. Go's os.Process holds a
// pidfd for it, so it is signalled with no pid reuse race, even after
// it has been reaped.
type initChild struct {
	proc *os.Process
	// reaped is closed once the init has been waited for: its pid
	// namespace is gone and it has left its cgroups, which can then be
	// removed at once (a zombie still holds them: rmdir says EBUSY).
	reaped chan struct{}
}

// superviseInit reaps the started init as soon as it exits.
func superviseInit(cmd *exec.Cmd) *initChild {
	ch := &initChild{proc: cmd.Process, reaped: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(ch.reaped)
	}()
	return ch
}

// kill ends the init and with it its pid namespace, and waits (up to two
// seconds) for it to be reaped.
func (ch *initChild) kill() {
	ch.signal()
	ch.wait()
}

// signal sends the init SIGKILL, unless it has exited already.
func (ch *initChild) signal() { _ = ch.proc.Kill() }

// wait waits (up to two seconds) for the init to be reaped.
func (ch *initChild) wait() {
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-ch.reaped:
	case <-t.C:
	}
}

// killInit ends session id's init and with it its pid namespace, and
// waits (up to two seconds) for it to be gone.
func killInit(pid int, id string) {
	if !initAlive(pid, id) {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err == nil {
		defer unix.Close(fd)
		if initAlive(pid, id) { // still ours after the open: no pid reuse race
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, 2000)
		}
		return
	}
	if errors.Is(err, unix.ESRCH) {
		// Gone since the check: its pid may be another process's by
		// now, which the kill below would reach.
		return
	}
	// No pidfd (a kernel before 5.3): by pid, checked just before.
	_ = unix.Kill(pid, unix.SIGKILL)
	for i := 0; i < 400 && initAlive(pid, id); i++ {
		time.Sleep(5 * time.Millisecond)
	}
}

// initAlive reports whether pid is a live (not zombie) agentbox init,
// session id's when id is not "" (and so not a recycled pid, nor another
// session's init that took it over): the init's arguments name its
// session.
func initAlive(pid int, id string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.HasPrefix(string(b), control.Marker+"\x00") {
		return false
	}
	if id != "" && !slices.Contains(strings.Split(string(b), "\x00"), "id="+id) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}
