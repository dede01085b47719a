package linux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A workspace quota (Resources.DiskBytes) is a filesystem of that size:
// a sparse ext4 image in the session directory, attached to a loop device
// and mounted (nosuid, nodev) on the session's fresh workspace directory.
// The kernel then refuses writes past the size with ENOSPC, whatever the
// command does. Only workspaces the session creates can get one; an
// existing host directory is refused (see checkSpec).

// minDiskBytes is the smallest image mkfs.ext4 makes usefully.
const minDiskBytes = 4 << 20

// mountDisk creates the image, formats it for uid:gid and mounts it on ws.
func mountDisk(ctx context.Context, img, ws string, size int64, uid, gid int) (err error) {
	if size < minDiskBytes {
		size = minDiskBytes
	}
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("disk quota: create image %s: %w", img, err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return fmt.Errorf("disk quota: size image to %d bytes: %w", size, err)
	}
	mkfs := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
		"-E", fmt.Sprintf("root_owner=%d:%d,lazy_itable_init=1", uid, gid), img)
	mkfs.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := mkfs.CombinedOutput(); err != nil {
		return fmt.Errorf("disk quota: mkfs.ext4 %s: %w: %s", img, err, strings.TrimSpace(string(out)))
	}
	f, err = os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("disk quota: open image %s: %w", img, err)
	}
	defer f.Close()
	dev, lf, err := attachLoop(f)
	if err != nil {
		return err
	}
	// The loop device stays open until mounted: autoclear detaches it when
	// its last user goes, and the mount becomes that user.
	defer lf.Close()
	if err := unix.Mount(dev, ws, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		_ = unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
		return fmt.Errorf("disk quota: mount %s (%s) on %s: %w", dev, img, ws, err)
	}
	_ = os.Remove(filepath.Join(ws, "lost+found"))
	return nil
}

// attachLoop binds the image to a free loop device that frees itself when
// its filesystem is unmounted (autoclear).
func attachLoop(img *os.File) (string, *os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", nil, fmt.Errorf("disk quota: open /dev/loop-control: %w", err)
	}
	defer ctl.Close()
	for attempt := 0; attempt < 20; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", nil, fmt.Errorf("disk quota: find a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			return "", nil, fmt.Errorf("disk quota: open %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if err == nil {
			return dev, lf, nil
		}
		lf.Close()
		if !errors.Is(err, unix.EBUSY) {
			return "", nil, fmt.Errorf("disk quota: attach image to %s: %w", dev, err)
		}
		time.Sleep(time.Millisecond) // raced another attach; take the next free one
	}
	return "", nil, errors.New("disk quota: no free loop device after 20 attempts")
}

// unmountDisk unmounts a quota filesystem from ws (its loop device then
// detaches itself). Unmounting what is not mounted is a no-op.
func unmountDisk(ws string) {
	for i := 0; i < 50; i++ {
		err := unix.Unmount(ws, 0)
		if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = unix.Unmount(ws, unix.MNT_DETACH)
}
