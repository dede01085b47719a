package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// An exposed port is reached in the container's own network namespace,
// without publishing anything through the engine: publishing would open
// a host port to every local user and, for a container on the "none"
// network, is not possible at all. The client makes a TCP socket inside
// the namespace (a socket keeps the namespace it was made in), then
// connects it to 127.0.0.1:port there. Entering another process's network
// namespace needs CAP_SYS_ADMIN over it, so this works for a client
// running as root beside a local engine, as the rest of this backend
// assumes (it reaches workspaces through /proc/PID/root); anywhere else
// it is refused by name.

// DialPort connects to an exposed port on the container's loopback.
func (s *session) DialPort(ctx context.Context, port int) (net.Conn, error) {
	const op = "docker: dial port"
	if err := s.live(); err != nil {
		return nil, err
	}
	if err := sandbox.CheckExposed(s.spec, port); err != nil {
		return nil, err
	}
	insp, err := s.c.api.ContainerInspect(ctx, s.containerID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, s.execError("dial port", err)
	}
	state := insp.Container.State
	switch {
	case state == nil || !state.Running || state.Pid <= 0:
		return nil, sandbox.Wrap(op, sandbox.ErrGone, fmt.Errorf("session %s: its container is not running", s.id))
	case state.Paused:
		return nil, s.pausedError()
	}
	fd, err := socketIn(fmt.Sprintf("/proc/%d/ns/net", state.Pid))
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, sandbox.Wrap(op, sandbox.ErrUnsupported, fmt.Errorf(
				"session %s: entering the container's network namespace needs root beside the engine: %w", s.id, err))
		}
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("session %s: %w", s.id, err))
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("port %d of %s", port, s.id))
	defer f.Close()
	// Loopback answers at once: a connect here either succeeds or is
	// refused, so a blocking connect cannot hang.
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		if errors.Is(err, unix.ECONNREFUSED) {
			return nil, sandbox.Wrap(op, sandbox.ErrNotFound, fmt.Errorf("nothing listens on port %d in session %s", port, s.id))
		}
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("port %d: %w", port, err))
	}
	conn, err := net.FileConn(f)
	if err != nil {
		return nil, sandbox.Wrap(op, nil, fmt.Errorf("port %d: %w", port, err))
	}
	return conn, nil
}

// socketIn makes an unconnected TCP socket in the network namespace at
// nsPath. It switches one OS thread into that namespace and back; if the
// way back fails, the thread is left locked, so the runtime discards it
// with the goroutine rather than run other code in the wrong namespace.
func socketIn(nsPath string) (int, error) {
	target, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", nsPath, err)
	}
	defer unix.Close(target)
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{-1, fmt.Errorf("open this thread's network namespace: %w", err)}
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{-1, fmt.Errorf("enter %s: %w", nsPath, err)}
			return
		}
		fd, serr := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			done <- result{-1, fmt.Errorf("return from %s: %w", nsPath, err)}
			return // still locked: the thread ends with this goroutine
		}
		runtime.UnlockOSThread()
		if serr != nil {
			done <- result{-1, fmt.Errorf("socket in %s: %w", nsPath, serr)}
			return
		}
		done <- result{fd, nil}
	}()
	r := <-done
	return r.fd, r.err
}
