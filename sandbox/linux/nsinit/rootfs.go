package nsinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/beneath"
	"github.com/agentbox/agentbox/sandbox/linux/control"
	"golang.org/x/sys/unix"
)

// etcBinds are host /etc entries bound read-only when present: TLS roots
// and the alternatives links that many tools resolve through.
var etcBinds = []string{"/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/ld.so.conf.d", "/etc/localtime"}

// etcCopies are host /etc files copied into the sandbox's own /etc.
var etcCopies = []string{"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/nsswitch.conf", "/etc/mime.types"}

// buildRoot lays out the sandbox's root under cfg.Root in the init's new
// mount namespace and pivots into it. The host's mount table never sees
// any of it (mounts are private from the first step).
func buildRoot(cfg *control.Config, sources []*os.File) error {
	// Threat: mounts propagating back to the host. Everything is made
	// private before anything is mounted.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := cfg.Root
	if err := unix.Mount("agentbox", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=16m,mode=0755"); err != nil {
		return fmt.Errorf("mount root tmpfs on %s: %w", root, err)
	}
	for _, d := range control.ToolDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		dst := filepath.Join(root, d)
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err != nil {
				return fmt.Errorf("read link %s: %w", d, err)
			}
			if err := os.Symlink(target, dst); err != nil {
				return fmt.Errorf("link %s -> %s: %w", dst, target, err)
			}
			continue
		}
		if !fi.IsDir() {
			continue
		}
		if err := bindInto(root, d, d, true); err != nil {
			return err
		}
	}
	if err := buildEtc(cfg); err != nil {
		return err
	}
	if err := buildDev(cfg); err != nil {
		return err
	}
	if err := buildProc(root); err != nil {
		return err
	}
	tmpOpts := "mode=1777,size=" + strconv.FormatInt(cfg.TmpBytes, 10)
	for _, d := range []string{"/tmp", "/dev/shm"} {
		dst := filepath.Join(root, d)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpOpts); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", d, err)
		}
	}
	if cfg.Network == "allowlist" {
		// The egress proxy's CA is only known once the proxy runs (and a
		// resumed session gets a new one), so its bundle lives on a
		// tmpfs that stays writable when the root turns read-only.
		dst := filepath.Join(root, control.TrustDir)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", control.TrustDir, err)
		}
		if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=2m"); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", control.TrustDir, err)
		}
	}
	// /dev is complete once /dev/shm is mounted on it: make its tmpfs
	// read-only, so that root inside cannot change its modes or add nodes.
	if err := unix.Mount("", filepath.Join(root, "dev"), "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("remount /dev read-only: %w", err)
	}
	sessionFS = sessionUser{uid: cfg.UID, gid: cfg.GID}
	source := func(i int, path, p string, readOnly bool) error {
		if cfg.Idmapped {
			return moveSource(root, sources[i], p)
		}
		return bindSource(root, path, p, readOnly)
	}
	if err := source(0, cfg.Workspace, cfg.Workdir, false); err != nil {
		return fmt.Errorf("workspace %s: %w", cfg.Workspace, err)
	}
	// From here on the targets lie in the workspace or a read-write mount,
	// which the host and other sessions can change under us: every mount
	// below is made on a descriptor, reached without following a link
	// (see openInRoot).
	for i, m := range cfg.Mounts {
		if err := source(1+i, m.Source, m.Target, m.ReadOnly); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.Source, m.Target, err)
		}
	}
	for _, p := range cfg.ReadOnly {
		if err := bindReadOnly(root, p); err != nil {
			return fmt.Errorf("read-only path %s: %w", p, err)
		}
	}
	for _, p := range cfg.Deny {
		if control.UnderDenied(p, cfg.Deny) {
			continue
		}
		if err := denyPath(root, p); err != nil {
			return fmt.Errorf("deny path %s: %w", p, err)
		}
	}
	if err := pinParents(root, cfg); err != nil {
		return err
	}
	for _, name := range []string{stageDir, stageFile} {
		if err := os.Remove(filepath.Join(root, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove staging point /%s: %w", name, err)
		}
	}
	if err := pivot(root); err != nil {
		return err
	}
	// The root tmpfs itself (/, /etc, the mount points) becomes read-only.
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount / read-only: %w", err)
	}
	return nil
}

// Mounting by descriptor. Threat: buildRoot runs before pivot_root, where
// every path still leads to the host, and the workspace and read-write
// mounts are shared with the host and with other sessions. A component
// swapped for a symlink between noSymlinks and a mount by name would send
// the mount where the link points: a read-only policy path turned into a
// link to /etc would bind the host's /etc in, a denied path turned into a
// link would mask something else and leave the secret in view (the race
// of runc's CVE-2021-30465). So a sandbox path is only ever opened, by
// openInRoot, component by component from the root without following a
// link, and the kernel is handed the /proc/self/fd magic link of what was
// opened, which it takes as that very inode, never as a name to resolve
// again. A bind is made and given its flags on a staging point in the
// root tmpfs, which only this mount namespace sees, and then moved onto
// the descriptor, so no remount goes by name through the shared tree.

// Staging points in the root tmpfs, for a directory and a file bind; they
// are removed before pivot_root.
const (
	stageDir  = ".agentbox-stage"
	stageFile = ".agentbox-stage-file"
)

// pointKind is what openInRoot must find, or make, at a path's end.
type pointKind int

const (
	existing  pointKind = iota // anything but a link, which must exist
	dirPoint                   // a directory, made (with its parents) when missing
	filePoint                  // a non-directory, made as an empty file when missing
)

// fdPath is the magic link through which the kernel reaches fd itself.
// It is used before pivot_root only, where /proc is still the host's
// procfs (mounted in the copy of the host's mounts the init started
// with), whose self link names the init by its host pid.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// bindInto binds the host path src (the caller's choice, trusted) on the
// sandbox path p under root, made as a directory or a file to match src,
// with nosuid and nodev, and read-only when readOnly, which the kernel
// enforces for every user including root. p is opened by descriptor.
func bindInto(root, src, p string, readOnly bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	kind := filePoint
	if fi.IsDir() {
		kind = dirPoint
	}
	dst, err := openInRoot(root, p, kind)
	if err != nil {
		return err
	}
	defer unix.Close(dst)
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	if err := bindOnto(root, src, fi.IsDir(), dst, flags); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, p, err)
	}
	return nil
}

// bindSource binds the host directory or file path (a rootless
// session's workspace or mount source) on the sandbox path p under root,
// opened without following a symlink in any component (as the client
// opens an idmapped source): a link a sandbox planted in a shared
// directory never leads a mount elsewhere.
func bindSource(root, path, p string, readOnly bool) error {
	fd, err := beneath.OpenPath(path, beneath.Options{Flags: unix.O_PATH})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return bindInto(root, fdPath(fd), p, readOnly)
}

// moveSource puts the detached, idmapped mount src (the client set its
// flags) on the sandbox path p under root, made to match it. No host path
// is walked here: the client opened the source, and p is opened by
// descriptor.
func moveSource(root string, src *os.File, p string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return fmt.Errorf("stat the source: %w", err)
	}
	kind := filePoint
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		kind = dirPoint
	}
	dst, err := openInRoot(root, p, kind)
	if err != nil {
		return err
	}
	defer unix.Close(dst)
	if err := unix.MoveMount(int(src.Fd()), "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move the idmapped mount onto %s: %w", p, err)
	}
	return nil
}

// pinParents makes every directory between a read-only or denied path
// and the top of the sandbox layout a mount point of its own (a
// recursive bind onto itself, by descriptor). Threat: the mount that
// protects a path sits on that path only; the command cannot rename the
// mount point (EBUSY) but could rename a parent in the writable workspace
// (mv /workspace/src /workspace/old), taking the protected mount with it,
// and make the path anew: writable, or no longer hidden. A mount point
// cannot be renamed, so neither can any of the parents now. The bind is
// recursive so that it carries the mounts already made below it.
func pinParents(root string, cfg *control.Config) error {
	seen := map[string]bool{}
	var dirs []string
	for _, list := range [][]string{cfg.ReadOnly, cfg.Deny} {
		for _, p := range list {
			if control.UnderDenied(p, cfg.Deny) {
				continue
			}
			parts := strings.Split(strings.Trim(filepath.Clean("/"+p), "/"), "/")
			// parts[:1] is a top-level directory of the layout (the
			// workspace, /tmp, /mnt): a mount point already, or in the
			// root tmpfs, which becomes read-only.
			for i := 2; i < len(parts); i++ {
				d := "/" + strings.Join(parts[:i], "/")
				if !seen[d] && !control.UnderDenied(d, cfg.Deny) && !slices.Contains(cfg.Deny, d) {
					seen[d] = true
					dirs = append(dirs, d)
				}
			}
		}
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	for _, d := range dirs {
		fd, err := openInRoot(root, d, existing)
		if err != nil {
			return fmt.Errorf("pin %s: %w", d, err)
		}
		err = unix.Mount(fdPath(fd), fdPath(fd), "", unix.MS_BIND|unix.MS_REC, "")
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("pin %s (bind onto itself): %w", d, err)
		}
	}
	return nil
}

// bindReadOnly binds the existing sandbox path p onto itself read-only.
// Source and target are the one descriptor, so what is made read-only is
// the inode that was checked, and nothing from outside the root is bound.
func bindReadOnly(root, p string) error {
	fd, err := openInRoot(root, p, existing)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	return bindOnto(root, fdPath(fd), st.Mode&unix.S_IFMT == unix.S_IFDIR, fd, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV)
}

// bindOnto binds src on the staging point, remounts it there with flags
// (and those the kernel locked on the source mount, in a user namespace,
// which a remount must keep), and moves the result onto the descriptor
// dst. MS_RDONLY is ignored on a bind itself; only the remount applies it.
func bindOnto(root, src string, dir bool, dst int, flags uintptr) error {
	stage, err := stagePoint(root, dir)
	if err != nil {
		return err
	}
	if err := unix.Mount(src, stage, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	moved := false
	defer func() {
		if !moved {
			_ = unix.Unmount(stage, unix.MNT_DETACH)
		}
	}()
	var st unix.Statfs_t
	if err := unix.Statfs(stage, &st); err == nil {
		for _, f := range []struct{ st, ms uintptr }{
			{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_RDONLY, unix.MS_RDONLY},
			{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME},
			{unix.ST_RELATIME, unix.MS_RELATIME},
		} {
			if uintptr(st.Flags)&f.st != 0 {
				flags |= f.ms
			}
		}
	}
	if err := unix.Mount("", stage, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
		return fmt.Errorf("remount (read-only=%v): %w", flags&unix.MS_RDONLY != 0, err)
	}
	if err := unix.Mount(stage, fdPath(dst), "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move into place: %w", err)
	}
	moved = true
	return nil
}

// stagePoint returns the staging directory or file under root, made on
// first use. root's top level is the init's own tmpfs: no one else can
// put anything there, so it is used by name.
func stagePoint(root string, dir bool) (string, error) {
	p := filepath.Join(root, stageFile)
	var err error
	if dir {
		p = filepath.Join(root, stageDir)
		err = unix.Mkdir(p, 0o700)
	} else {
		var fd int
		fd, err = unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
		}
	}
	if err != nil && err != unix.EEXIST {
		return "", fmt.Errorf("create staging point %s: %w", p, err)
	}
	return p, nil
}

func touch(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create mount point %s: %w", path, err)
	}
	return f.Close()
}

// maskPath hides an existing sandbox path: a directory gets an empty
// read-only tmpfs with mode 000 over it, a file an empty mode-000 file. A
// path that does not exist is left alone, which is right for /proc (no
// one can make entries there); denied policy paths go through denyPath,
// which covers missing ones too.
func maskPath(root, p string) error {
	fd, err := openInRoot(root, p, existing)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return maskFd(root, fd)
}

// maskFd hides what fd is. Threat: without a user namespace, root inside
// the sandbox is host uid 0 and owns what is bound in; chmod, chown and
// utimes need only ownership, not a capability, so on a writable bind
// they would change the host's inode. The mask is therefore bound
// read-only (and nosuid, nodev, noexec), which refuses them with EROFS.
func maskFd(root string, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return mountMask(fdPath(fd))
	}
	flags := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := bindOnto(root, filepath.Join(root, maskFile), false, fd, flags); err != nil {
		return fmt.Errorf("bind the mask file: %w", err)
	}
	return nil
}

// denyPath enforces one Filesystem.Deny path. An existing one is masked
// where it is. Threat: a missing one, if skipped, would be the command's
// to create (mkdir it, write in it: "not writable" broken), and what a
// host process later put there, through the workspace or a read-write
// mount, would show inside. So a missing path is covered as well.
func denyPath(root, p string) error {
	fd, err := openInRoot(root, p, existing)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return coverMissing(root, p)
	case err != nil:
		return err
	}
	defer unix.Close(fd)
	return maskFd(root, fd)
}

// coverMissing makes the missing path p a directory and mounts the mask
// tmpfs on it, as the Docker backend does (the engine makes the mount
// point): inside, p can be neither listed, read, created nor written,
// whether the policy meant it as a file or a directory. ("mkdir -p p"
// exits 0, the directory being there, and changes nothing.)
//
// Where the directory is made depends on what holds p:
//   - the root tmpfs, /tmp, /dev/shm: the session's own, gone with it;
//   - the workspace or a read-write mount: the host directory. p (and any
//     missing parent) appears on the host, owned like the directory it is
//     made in; the client removes what it made, if still empty, when the
//     session is closed (see recordMadeDirs). What the host writes in it
//     meanwhile is not seen inside: the tmpfs covers it in this namespace.
//   - a read-only mount (the tool directories, a read-only mount or
//     policy path, /dev): nothing can be made there, by us or by the
//     command, so the session is refused naming the read-only directory
//     rather than left with a path a host process could fill later.
//
// A component that is a symlink or not a directory refuses p as well.
func coverMissing(root, p string) error {
	fd, err := makeMountPoint(root, p)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return mountMask(fdPath(fd))
}

// makeMountPoint opens the directory p under root, making what is missing
// of it, and returns its descriptor.
func makeMountPoint(root, p string) (int, error) {
	return openInRoot(root, p, dirPoint)
}

// openInRoot opens the sandbox path p under root, the way package beneath
// does (every component from its parent's descriptor, a link anywhere
// refused, mounts on the way entered as the sandbox will see them), and
// returns an O_PATH descriptor of its last component, made as kind says
// when it is missing (owned like the directory it is made in).
func openInRoot(root, p string, kind pointKind) (int, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rfd)
	o := beneath.Options{Flags: unix.O_PATH}
	switch kind {
	case dirPoint:
		o.Kind, o.Make = beneath.Dir, beneath.MakeMissing
	case filePoint:
		o.Kind, o.Make = beneath.NonDir, beneath.MakeMissing
	}
	fd, err := beneath.Open(rfd, p, o)
	if errors.Is(err, unix.EOVERFLOW) && o.Make != beneath.MakeNothing {
		// An idmapped tree (the workspace, a mount) maps the ids of its
		// owner and the session user only: what the init makes there is
		// made as the session user, and so lands as the owner's.
		err = sessionFS.do(func() error {
			var err error
			fd, err = beneath.Open(rfd, p, o)
			return err
		})
	}
	if err != nil {
		return -1, mountPointError(err)
	}
	return fd, nil
}

// sessionFS is the session user, as the init makes files in its trees.
var sessionFS sessionUser

// sessionUser is who files are made as in an idmapped tree.
type sessionUser struct{ uid, gid int }

// do runs f with the calling thread's file-system ids set to u's, and
// sets them back to root's after. The init's main goroutine is locked to
// its thread, which these ids belong to (they are per thread).
func (u sessionUser) do(f func() error) error {
	unix.Setfsgid(u.gid)
	unix.Setfsuid(u.uid)
	defer func() {
		unix.Setfsuid(0)
		unix.Setfsgid(0)
	}()
	return f()
}

// mountPointError says why no mount point could be had, in the words of
// what the session asked for; it unwraps to the errno.
func mountPointError(err error) error {
	var be *beneath.Error
	if !errors.As(err, &be) {
		return err
	}
	switch be.Err {
	case unix.EROFS:
		return fmt.Errorf("%s does not exist and its directory is on a read-only mount, where no mount point can be made for it; create it on the host first: %w", be.Component, be.Err)
	case unix.ENOTDIR:
		return fmt.Errorf("%s is not a directory, so no mount point can be made there: %w", be.Component, be.Err)
	case unix.EISDIR:
		return fmt.Errorf("%s is a directory, and a file is to be mounted there: %w", be.Component, be.Err)
	}
	return err
}

// mountMask mounts an empty read-only tmpfs with mode 000 on dir: there
// is nothing under it to read, and no user can make or write anything in it.
func mountMask(dir string) error {
	return unix.Mount("masked", dir, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,mode=000")
}

// remountDeviceReadOnly makes a bound device node read-only, nosuid and
// noexec; it must keep working as a device (no MS_NODEV). Threat: root
// inside is host uid 0 and owns the host's node; on a writable bind,
// chmod, chown and utimes (which need only ownership) would change the
// host's inode. A read-only mount refuses them with EROFS; reading and
// writing the device still work.
func remountDeviceReadOnly(dst string) error {
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NOEXEC)
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", dst, err)
	}
	return nil
}

// maskFile is an empty, mode-000 file in the root tmpfs that masked files
// are bound to.
const maskFile = ".masked"

// buildEtc writes a minimal /etc: the sandbox user, localhost, name
// service switch, the dynamic linker's cache, TLS roots.
func buildEtc(cfg *control.Config) error {
	etc := filepath.Join(cfg.Root, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return fmt.Errorf("create /etc: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Root, maskFile), nil, 0); err != nil {
		return fmt.Errorf("create mask file: %w", err)
	}
	name := "sandbox"
	if cfg.UID == 0 {
		name = "root"
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\n"
	group := "root:x:0:\ntty:x:5:\n"
	if cfg.UID != 0 {
		passwd += fmt.Sprintf("%s:x:%d:%d:agentbox sandbox user:/tmp:/bin/sh\n", name, cfg.UID, cfg.GID)
	}
	if cfg.GID != 0 && cfg.GID != 5 {
		group += fmt.Sprintf("%s:x:%d:\n", name, cfg.GID)
	}
	passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group += "nogroup:x:65534:\n"
	files := map[string]string{
		"passwd":   passwd,
		"group":    group,
		"hostname": hostname + "\n",
		"hosts":    "127.0.0.1\tlocalhost " + hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	}
	for _, src := range etcCopies {
		err := copyHostFile(src, filepath.Join(etc, filepath.Base(src)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
	}
	if _, err := os.Stat(filepath.Join(etc, "nsswitch.conf")); err != nil {
		files["nsswitch.conf"] = "passwd: files\ngroup: files\nhosts: files dns\n"
	}
	if cfg.Network == "host" {
		if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
			files["resolv.conf"] = string(b)
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("write /etc/%s: %w", name, err)
		}
	}
	for _, src := range etcBinds {
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := bindInto(cfg.Root, src, src, true); err != nil {
			return err
		}
	}
	return nil
}

// copyHostFile copies the host file src to dst (made mode 0644). What is
// not a regular file is skipped (as missing: os.ErrNotExist).
func copyHostFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file: %w", src, os.ErrNotExist)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// hostname is the sandbox's host name.
const hostname = "agentbox"

// devNodes are the host devices bound into the sandbox's /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// buildDev makes a minimal /dev: a few harmless devices, a private devpts
// (so the sandbox sees only its own terminals), shm, and the fd links.
func buildDev(cfg *control.Config) error {
	dev := filepath.Join(cfg.Root, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return fmt.Errorf("create /dev: %w", err)
	}
	if err := unix.Mount("dev", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("mount /dev tmpfs: %w", err)
	}
	for _, n := range devNodes {
		dst := filepath.Join(dev, n)
		if err := touch(dst); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
		if err := remountDeviceReadOnly(dst); err != nil {
			return err
		}
	}
	pts := filepath.Join(dev, "pts")
	if err := os.MkdirAll(pts, 0o755); err != nil {
		return fmt.Errorf("create /dev/pts: %w", err)
	}
	ptsOpts := "newinstance,ptmxmode=0666,mode=0620,gid=5"
	if cfg.Rootless {
		ptsOpts = "newinstance,ptmxmode=0666,mode=0620" // gid 5 maps to no host group
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, ptsOpts); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	links := map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "core": "/proc/kcore",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("link /dev/%s: %w", name, err)
		}
	}
	return nil
}

// procReadOnly are /proc entries remounted read-only: writing them would
// reconfigure the host kernel. procMasked are hidden entirely: they leak
// kernel memory, keys or timing.
var (
	procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}
	procMasked   = []string{"kcore", "keys", "key-users", "timer_list", "sched_debug", "kmsg", "kallsyms", "acpi", "scsi", "latency_stats", "config.gz",
		// Kernel memory layout and allocator state: aids to heap and
		// address-space exploits, of no use to a command.
		"slabinfo", "kpageflags", "kpagecount", "kpagecgroup", "vmallocinfo", "pagetypeinfo", "iomem", "ioports",
		// The host's identity across sessions (a fingerprint that ties
		// sandboxes together).
		"sys/kernel/random/boot_id"}
)

// buildProc mounts a /proc of the session's pid namespace and masks what
// must not be reachable from it.
func buildProc(root string) error {
	proc := filepath.Join(root, "proc")
	if err := os.MkdirAll(proc, 0o555); err != nil {
		return fmt.Errorf("create /proc: %w", err)
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, p := range procReadOnly {
		dst := filepath.Join(proc, p)
		if _, err := os.Lstat(dst); err != nil {
			continue
		}
		if err := unix.Mount(dst, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /proc/%s: %w", p, err)
		}
		if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("remount /proc/%s read-only: %w", p, err)
		}
	}
	for _, p := range procMasked {
		if err := maskPath(root, filepath.Join("/proc", p)); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", p, err)
		}
	}
	return nil
}

// pivot makes root the process's root and detaches the old one, so no
// path leads back to the host's filesystem.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("enter new root: %w", err)
	}
	// pivot_root(".", ".") stacks the old root under the new one; the
	// lazy unmount then drops it (the runc way, no temporary directory).
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root into %s: %w", root, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	return nil
}
