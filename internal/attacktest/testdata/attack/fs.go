package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	register("read", func(a []string) error {
		need(a, 1, "read PATH")
		b, err := os.ReadFile(a[0])
		if err == nil {
			fmt.Printf("content: %q\n", b)
		}
		return err
	})
	register("write", func(a []string) error {
		need(a, 2, "write PATH DATA")
		f, err := os.OpenFile(a[0], os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(a[1]); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	// fill writes files of SIZE MiB named DIR/fill.N until a write fails
	// or MAX files are written, and reports how much it wrote.
	register("fill", func(a []string) error {
		need(a, 3, "fill DIR SIZE_MIB MAX_FILES")
		signal.Ignore(syscall.SIGXFSZ) // get EFBIG instead of dying
		size, _ := strconv.Atoi(a[1])
		max, _ := strconv.Atoi(a[2])
		chunk := make([]byte, 1<<20)
		var total int64
		defer func() { fmt.Printf("written: %d\n", total) }()
		for i := 0; i < max; i++ {
			f, err := os.Create(fmt.Sprintf("%s/fill.%d", a[0], i))
			if err != nil {
				return err
			}
			for j := 0; j < size; j++ {
				n, err := f.Write(chunk)
				total += int64(n)
				if err != nil {
					f.Close()
					return err
				}
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
		return nil
	})
	register("setxattr", func(a []string) error {
		need(a, 1, "setxattr PATH")
		return unix.Setxattr(a[0], "user.agentbox-escapetest", []byte("1"), 0)
	})
	// reopen-rw opens PATH read-only, then reopens it for writing through
	// /proc/self/fd, which must not shed the mount's read-only flag.
	register("reopen-rw", func(a []string) error {
		need(a, 1, "reopen-rw PATH")
		f, err := os.Open(a[0])
		if err != nil {
			return err
		}
		defer f.Close()
		g, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = g.WriteString("pwned")
		g.Close()
		return err
	})
	register("mknod", func(a []string) error {
		need(a, 1, "mknod PATH")
		return unix.Mknod(a[0], unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0)))
	})
	register("chroot", func(a []string) error {
		need(a, 1, "chroot DIR")
		return unix.Chroot(a[0])
	})
	// open-by-handle is the "shocker" escape: get a handle for a path,
	// then open it (or any inode of the filesystem) by handle, which
	// bypasses the mount view.
	register("open-by-handle", func(a []string) error {
		need(a, 1, "open-by-handle PATH")
		h, mountID, err := unix.NameToHandleAt(unix.AT_FDCWD, a[0], 0)
		if err != nil {
			return fmt.Errorf("name_to_handle_at: %w", err)
		}
		fmt.Printf("mount id %d, handle type %d\n", mountID, h.Type())
		mfd, err := unix.Open(a[0], unix.O_RDONLY|unix.O_PATH, 0)
		if err != nil {
			return err
		}
		defer unix.Close(mfd)
		fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY)
		if err != nil {
			return fmt.Errorf("open_by_handle_at: %w", err)
		}
		unix.Close(fd)
		return nil
	})
	// fds lists the descriptors above 2 that the process inherited.
	register("fds", func(a []string) error {
		var leaked []string
		for fd := 3; fd < 1024; fd++ {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
				continue
			}
			target, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
			leaked = append(leaked, fmt.Sprintf("%d -> %s", fd, target))
		}
		for _, l := range leaked {
			fmt.Println("fd", l)
		}
		if len(leaked) > 0 {
			return nil // an inherited descriptor is the attack's foothold
		}
		return unix.EBADF
	})

	// openat-leaked reads RELPATH relative to every inherited directory
	// descriptor: a leaked host directory leads anywhere below it.
	register("openat-leaked", func(a []string) error {
		need(a, 1, "openat-leaked RELPATH")
		err := error(unix.EBADF)
		for fd := 3; fd < 1024; fd++ {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			f, oerr := unix.Openat(fd, a[0], unix.O_RDONLY, 0)
			if oerr != nil {
				fmt.Printf("fd %d: %v\n", fd, oerr)
				err = oerr
				continue
			}
			b := make([]byte, 4096)
			n, _ := unix.Read(f, b)
			unix.Close(f)
			fmt.Printf("fd %d: content: %q\n", fd, b[:n])
			return nil
		}
		return err
	})
	// abuse-leaked lists every inherited directory descriptor and
	// overwrites every inherited regular file descriptor: landlock checks
	// paths when they are opened, not descriptors opened outside.
	register("abuse-leaked", func(a []string) error {
		err := error(unix.EBADF)
		for fd := 3; fd < 1024; fd++ {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) != nil {
				continue
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFDIR:
				buf := make([]byte, 8192)
				n, derr := unix.Getdents(fd, buf)
				if derr != nil {
					err = derr
					continue
				}
				_, _, names := unix.ParseDirent(buf[:n], -1, nil)
				fmt.Printf("fd %d lists: %v\n", fd, names)
				err = nil
			case unix.S_IFREG:
				if _, werr := unix.Pwrite(fd, []byte("pwned"), 0); werr != nil {
					err = werr
					continue
				}
				fmt.Printf("fd %d: overwritten\n", fd)
				err = nil
			}
		}
		return err
	})
	register("mount-tmpfs", func(a []string) error {
		need(a, 1, "mount-tmpfs DIR")
		return unix.Mount("none", a[0], "tmpfs", 0, "size=1m")
	})
	register("mount-bind", func(a []string) error {
		need(a, 2, "mount-bind SRC DST")
		return unix.Mount(a[0], a[1], "", unix.MS_BIND, "")
	})
	register("remount-rw", func(a []string) error {
		need(a, 1, "remount-rw DIR")
		return unix.Mount("", a[0], "", unix.MS_REMOUNT|unix.MS_BIND, "")
	})
	register("umount", func(a []string) error {
		need(a, 1, "umount DIR")
		return unix.Unmount(a[0], unix.MNT_DETACH)
	})
	register("pivot-root", func(a []string) error {
		need(a, 2, "pivot-root NEW PUT_OLD")
		return unix.PivotRoot(a[0], a[1])
	})
	register("fsopen", func(a []string) error {
		fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	register("open-tree", func(a []string) error {
		need(a, 1, "open-tree PATH")
		fd, err := unix.OpenTree(unix.AT_FDCWD, a[0], unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	register("mount-setattr-rw", func(a []string) error {
		need(a, 1, "mount-setattr-rw PATH")
		attr := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		_, _, e := unix.Syscall6(unix.SYS_MOUNT_SETATTR, atFDCWD, uintptr(unsafe.Pointer(bytePtr(a[0]))),
			0, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
		return errnoOf(e)
	})
}

// atFDCWD is AT_FDCWD as a system-call argument.
var atFDCWD = uintptr(^uint(99)) // -100

func bytePtr(s string) *byte {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return p
}
