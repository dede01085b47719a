package snapshot

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// rawFile is a file descriptor used with plain read(2) and write(2). The
// store opens thousands of regular files per save or restore; *os.File
// would probe each one for the runtime poller (fcntl, epoll_ctl), which
// regular files never use.
type rawFile struct {
	fd   int
	name string
}

// openRaw opens name with open(2) flags and O_CLOEXEC.
func openRaw(name string, flags int, perm uint32) (*rawFile, error) {
	for {
		fd, err := unix.Open(name, flags|unix.O_CLOEXEC, perm)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return &rawFile{fd: fd, name: name}, nil
	}
}

func (f *rawFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(f.fd, p)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, &os.PathError{Op: "read", Path: f.name, Err: err}
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *rawFile) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Write(f.fd, p[done:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return done, &os.PathError{Op: "write", Path: f.name, Err: err}
		}
		done += n
	}
	return done, nil
}

func (f *rawFile) Seek(off int64, whence int) (int64, error) {
	n, err := unix.Seek(f.fd, off, whence)
	if err != nil {
		return 0, &os.PathError{Op: "seek", Path: f.name, Err: err}
	}
	return n, nil
}

func (f *rawFile) Close() error {
	if f.fd < 0 {
		return nil
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return &os.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}
