package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

// A workspace the backend makes (no Spec.Workspace) is bounded, as the
// native backend's is: a command could otherwise write gigabytes and
// hundreds of thousands of files to the host's disk. As root it is a
// directory in a tmpfs of its own (defaultWorkspaceBytes, or --disk, and
// defaultWorkspaceInodes), mounted on the host where the temporary
// directory was made, which the container binds; what commands write in
// it is memory their memory limit counts, as for /tmp.
//
// A session of a process must leave nothing when that process ends,
// whatever ends it, and the engine removes only the container. So once
// the container runs (its mount namespace holds the tmpfs) the host's
// mount is detached and its directory removed: the tmpfs lives as long
// as the container (and this process's descriptors of it). The session's
// workspace is then the container init's view of it
// (/proc/PID/root/workspace: what State says, which the host reaches
// while the container runs), never removed by path (a pid is reused),
// and this process holds a descriptor of it. A
// detached session keeps the host mount until Close or Delete (its Stop
// and Resume need it), recorded in its state.
//
// Not root, the workspace is a plain temporary directory, unbounded, and
// --disk is refused.

const (
	// defaultWorkspaceBytes and defaultWorkspaceInodes bound a workspace
	// the backend makes when no --disk asks for another size.
	defaultWorkspaceBytes  = 2 << 30
	defaultWorkspaceInodes = 256 << 10
	// workspacePrefix starts the name of the temporary directory of a
	// workspace the backend makes.
	workspacePrefix = "agentbox-docker-"
)

// canBound reports whether this process can mount a workspace's tmpfs.
func canBound() bool { return os.Geteuid() == 0 }

// boundWorkspace mounts a tmpfs of size bytes on dir, a fresh private
// directory, and returns the workspace's path in it: a directory of the
// tmpfs, so that a snapshot can be restored beside it and renamed into
// place, and so that the container's mount table shows no host path.
func boundWorkspace(dir string, size int64) (string, error) {
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", size, defaultWorkspaceInodes)
	if err := unix.Mount("agentbox-workspace", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return "", sandbox.Wrap("docker: create workspace", nil, fmt.Errorf("bound the workspace %s with a tmpfs (%s): %w", dir, opts, err))
	}
	return filepath.Join(dir, "w"), nil
}

// unbound detaches the tmpfs mounted on dir and removes the directory,
// which is then empty; the tmpfs lives on while a container or a
// descriptor holds it. A dir that is not such a mount point is left as
// it is (only an empty one is removed).
func unbound(dir string) error {
	if !validTmpfsDir(dir) {
		return sandbox.Errorf(sandbox.ErrInvalid, "docker: %q is not a workspace mount point agentbox made", dir)
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return sandbox.Wrap("docker: unmount workspace "+dir, nil, err)
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		return sandbox.Wrap("docker: remove workspace "+dir, nil, err)
	}
	return nil
}

// validTmpfsDir accepts what prepareWorkspace makes: an absolute path
// whose last component is a workspace temporary directory's.
func validTmpfsDir(dir string) bool {
	return filepath.IsAbs(dir) && filepath.Clean(dir) == dir && strings.HasPrefix(filepath.Base(dir), workspacePrefix)
}

// inContainer is the path, in this process, of the workspace of the
// running container whose init is pid: through that process's root.
func inContainer(pid int, workdir string) string {
	return fmt.Sprintf("/proc/%d/root%s", pid, workdir)
}

// filesPath is where this process reaches the workspace's files: its
// host path, or, when that names nothing any more, its held descriptor.
func (s *session) filesPath() string {
	if s.held != nil {
		return fmt.Sprintf("/proc/self/fd/%d", s.held.Fd())
	}
	return s.workspace
}

// detachWorkspace leaves the tmpfs of a session of a process to its
// container (see above), once the container runs and its binds are
// checked.
func (s *session) detachWorkspace(ctx context.Context) error {
	insp, err := s.c.api.ContainerInspect(ctx, s.containerID, client.ContainerInspectOptions{})
	if err != nil {
		return s.c.unavailable("docker: inspect container "+shortID(s.containerID), err)
	}
	if insp.Container.State == nil || insp.Container.State.Pid <= 0 {
		return sandbox.Errorf(sandbox.ErrUnavailable, "docker: container %s has no init process", shortID(s.containerID))
	}
	held, err := os.Open(s.workspace)
	if err != nil {
		return sandbox.Wrap("docker: hold workspace "+s.workspace, nil, err)
	}
	if err := unbound(s.tmpfsDir); err != nil {
		held.Close()
		return err
	}
	s.held, s.tmpfsDir = held, ""
	s.workspace = inContainer(insp.Container.State.Pid, s.spec.Workdir)
	return nil
}
