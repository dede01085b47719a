package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The control protocol between a client and a session's init runs over
// a unix SOCK_SEQPACKET socket: one JSON object per packet, with file
// descriptors attached as SCM_RIGHTS. Each command gets a connection of
// its own: the client sends an exec request carrying the command's stdio
// (three pipe ends, or one terminal), the init answers with the started
// pid and, later, with the exit status. Output never crosses the control
// channel. Closing the connection before the exit kills the command.

// Request is what a client sends to the init.
type Request struct {
	// Op is OpExec, OpKill, OpInfo, OpListen, OpConnect or OpExtend.
	Op string `json:"op"`
	// Exec fields.
	Cmd []string `json:"cmd,omitempty"`
	Dir string   `json:"dir,omitempty"`
	Env []string `json:"env,omitempty"`
	TTY bool     `json:"tty,omitempty"`
	// Timeout (nanoseconds, 0 for none) is when the init kills the
	// command's whole tree: the limit holds inside the sandbox, whatever
	// becomes of the client that asked.
	Timeout int64 `json:"timeout,omitempty"`
	// Port is the loopback port OpListen asks for (0: any), or the one
	// OpConnect connects to.
	Port int `json:"port,omitempty"`
	// CACert, with OpListen, is the egress proxy's session CA (PEM): the
	// init writes the sandbox's system bundle followed by it to
	// TrustBundle before it answers, replacing an older one.
	CACert string `json:"ca_cert,omitempty"`
}

// TrustDir is a small tmpfs of its own in a session with an allow-list,
// writable by the init after the root became read-only; TrustBundle in
// it is the CA bundle the sandbox's TLS clients are pointed at.
const (
	TrustDir    = "/etc/agentbox"
	TrustBundle = TrustDir + "/ca-bundle.pem"
)

const (
	OpExec = "exec"
	OpKill = "kill"
	OpInfo = "info"
	// OpListen asks for a TCP listener on the sandbox's 127.0.0.1 (the
	// egress proxy's); the Reply carries its descriptor.
	OpListen = "listen"
	// OpConnect asks the init to connect to a port on the sandbox's
	// 127.0.0.1 (an exposed port); the Reply carries the connected
	// socket, or NotFound when nothing listens there.
	OpConnect = "connect"
	// OpExtend is a use of the session and nothing else: the idle
	// timeout starts again (sandbox.Extend).
	OpExtend = "extend"
)

// Reply is what the init sends back.
type Reply struct {
	// Error is set when the request failed; NotFound marks a command that
	// does not exist in the sandbox.
	Error    string `json:"error,omitempty"`
	NotFound bool   `json:"not_found,omitempty"`
	// Again marks a command the kernel would not start for want of a
	// process (EAGAIN from fork): the session's pids limit is reached.
	Again bool `json:"again,omitempty"`
	// Pid is the started command's pid (in the session's pid namespace).
	Pid int `json:"pid,omitempty"`
	// Exited carries the exit status once the command has ended.
	Exited *ExitReport `json:"exited,omitempty"`
	// Info answers OpInfo.
	Info *Info `json:"info,omitempty"`
}

// ExitReport is how a command ended, as the init saw it.
type ExitReport struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	// Killed says the command was killed on request (kill or timeout).
	Killed bool `json:"killed,omitempty"`
	// TimedOut says the init killed it at Request.Timeout.
	TimedOut bool `json:"timed_out,omitempty"`
}

// Info describes a live init.
type Info struct {
	ID       string   `json:"id"`
	Landlock string   `json:"landlock"`
	Notes    []string `json:"notes,omitempty"`
}

// MaxPacket bounds one request packet (a command line and environment);
// MaxReply bounds what the init sends back.
const (
	MaxPacket = 1 << 20
	MaxReply  = 16 << 10
	// maxPassed is how many descriptors one packet may carry: the most is
	// the config's (the control socket, the log, the workspace and
	// MaxMounts mounts); an exec request brings three stdio ends.
	maxPassed = 32
)

// Send writes one JSON packet with optional file descriptors.
func Send(c *net.UnixConn, v any, files ...*os.File) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > MaxPacket {
		return fmt.Errorf("control message of %d bytes exceeds %d", len(b), MaxPacket)
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	_, _, err = c.WriteMsgUnix(b, oob, nil)
	return err
}

// Recv reads one JSON packet of at most limit bytes into v and returns the descriptors that came
// with it. io.EOF means the peer closed the connection.
func Recv(c *net.UnixConn, v any, limit int) ([]*os.File, error) {
	oob := make([]byte, unix.CmsgSpace(4*maxPassed))
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var n, oobn, flags int
	var rerr error
	var buf []byte
	err = rc.Read(func(fd uintptr) bool {
		// Peek at the packet's size first, so that the buffer is just as
		// big as needed (a fresh megabyte per request costs page faults).
		var one [1]byte
		size, _, _, _, perr := unix.Recvmsg(int(fd), one[:], nil, unix.MSG_PEEK|unix.MSG_TRUNC)
		if perr == unix.EAGAIN {
			return false
		}
		if perr != nil {
			rerr = perr
			return true
		}
		buf = make([]byte, min(max(size, 1), limit))
		// MSG_CMSG_CLOEXEC: a received descriptor must never leak into a
		// command forked concurrently.
		n, oobn, flags, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	var files []*os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, fmt.Errorf("parse control message: %w", err)
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "passed"))
			}
		}
	}
	if flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 {
		CloseAll(files)
		return nil, errors.New("control message truncated (too large, or too many descriptors)")
	}
	if n == 0 {
		CloseAll(files)
		return nil, ErrEOF
	}
	if err := json.Unmarshal(buf[:n], v); err != nil {
		CloseAll(files)
		return nil, fmt.Errorf("decode control message: %w", err)
	}
	return files, nil
}

// ErrEOF is a closed control connection (a zero-length packet).
var ErrEOF = errors.New("control connection closed")

func CloseAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// maxSunPath is the longest socket path bind and connect take (sun_path
// is 108 bytes with its terminating NUL).
const maxSunPath = 107

// viaDir runs f with a name for the socket path sock that fits sun_path:
// sock itself when it is short enough, else the path through a descriptor
// of its directory (/proc/self/fd/N/control.sock). A long TMPDIR or
// XDG_RUNTIME_DIR would otherwise make every session fail with "bind:
// invalid argument".
func viaDir[T any](sock string, f func(name string) (T, error)) (T, error) {
	if len(sock) <= maxSunPath {
		return f(sock)
	}
	fd, err := unix.Open(filepath.Dir(sock), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("open the directory of %s: %w", sock, err)
	}
	defer unix.Close(fd)
	return f(fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(sock)))
}

// Dial connects to a session's control socket.
func Dial(sock string) (*net.UnixConn, error) {
	return viaDir(sock, func(name string) (*net.UnixConn, error) {
		return net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: name, Net: "unixpacket"})
	})
}

// Listen binds and listens on a session's control socket.
func Listen(sock string) (*net.UnixListener, error) {
	return viaDir(sock, func(name string) (*net.UnixListener, error) {
		return net.ListenUnix("unixpacket", &net.UnixAddr{Name: name, Net: "unixpacket"})
	})
}
