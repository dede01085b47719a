package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/beneath"
	"github.com/agentbox/agentbox/internal/owned"
	"github.com/agentbox/agentbox/sandbox"
)

// fileID is a host file's device and inode, as recorded in the state.
type fileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// bindSet is every host directory the container binds, held by a
// descriptor since agentbox read its owner, and what must be found at
// each bind's target once the container runs.
//
// Threat: the engine binds by path, resolving it when the container
// starts. Whoever can write a directory on the way to the workspace (a
// session sharing its parent, say) can swap the path for a link to /etc
// after agentbox read the workspace's owner (root, say) and before the
// engine binds it; the container would then run as root over /etc. So
// each bind is compared, before any command runs, with what agentbox
// holds (verifyBinds), and a container that got something else is
// removed.
type bindSet struct {
	ws     *owned.Path
	mounts []*owned.Path // one per Spec.Mounts entry, in order
	want   map[string]fileID
}

// base is the held directory a sandbox path's host source lies in.
func (b *bindSet) base(spec sandbox.Spec, source string) *owned.Path {
	for i, m := range spec.Mounts {
		if m.Source == source && i < len(b.mounts) {
			return b.mounts[i]
		}
	}
	return b.ws
}

func (b *bindSet) expect(target string, p *owned.Path) {
	if b.want == nil {
		b.want = map[string]fileID{}
	}
	b.want[path.Clean(target)] = fileID{p.ID.Dev, p.ID.Ino}
}

// close releases the descriptors; the identities stay.
func (b *bindSet) close() {
	b.ws.Close()
	for _, m := range b.mounts {
		m.Close()
	}
}

// pinBelow opens rel beneath the held directory base, refusing a symlink
// in any component (a link the sandbox left in the workspace, in -> /root,
// would otherwise bind that host directory), and makes it a directory
// owned like its parent when it is missing.
func pinBelow(base *owned.Path, rel string) (*owned.Path, error) {
	fd, err := beneath.Open(base.Fd(), rel, beneath.Options{Flags: unix.O_PATH})
	if errors.Is(err, unix.ENOENT) {
		fd, err = beneath.Open(base.Fd(), rel, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir, Make: beneath.MakeMissing})
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, sandbox.Wrap("docker: policy path in "+base.Name, sandbox.ErrPathEscape, err)
	}
	if err != nil {
		return nil, sandbox.Wrap("docker: policy path in "+base.Name, nil, err)
	}
	return owned.FromFd(path.Join(base.Name, rel), fd)
}

// verifyBinds checks, after the container started and before any command
// runs in it, that each bind target in want is the host file agentbox
// holds, looking through /proc/PID/root of the container's init with
// openat2(RESOLVE_IN_ROOT). It cannot look when the engine is not on this
// host or in this pid namespace, or, not as root, when the kernel does
// not let this process see the container's root: then it says so in the
// debug log and trusts the engine (not as root, a swap gains nothing the
// session user could not reach anyway). As root on a local engine, a
// container it cannot look into is refused.
func (c *Client) verifyBinds(ctx context.Context, cid string, want map[string]fileID) error {
	if len(want) == 0 {
		return nil
	}
	if !c.engine.local {
		c.log.Debug("docker: binds not checked: the engine is not on this host", "container", shortID(cid))
		return nil
	}
	insp, err := c.api.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	if err != nil {
		return c.unavailable("docker: inspect container "+shortID(cid), err)
	}
	if insp.Container.State == nil || insp.Container.State.Pid <= 0 {
		return sandbox.Errorf(sandbox.ErrUnavailable, "docker: container %s has no running init to check its mounts through", shortID(cid))
	}
	proc := fmt.Sprintf("/proc/%d/root", insp.Container.State.Pid)
	root, err := unix.Open(proc, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.Geteuid() != 0 || errors.Is(err, unix.ENOENT) {
			c.log.Debug("docker: binds not checked", "container", shortID(cid), "open", proc, "err", err)
			return nil
		}
		return sandbox.Wrap("docker: check the mounts of container "+shortID(cid), nil, fmt.Errorf("open %s: %w", proc, err))
	}
	defer unix.Close(root)
	var bad []string
	for target, id := range want {
		fd, err := beneath.OpenInRoot(root, target, beneath.Options{Flags: unix.O_PATH})
		var st unix.Stat_t
		if err == nil {
			err = unix.Fstat(fd, &st)
			unix.Close(fd)
		}
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", target, err))
		case st.Dev != id.Dev || st.Ino != id.Ino:
			bad = append(bad, target+" is not the directory agentbox opened (its path was replaced meanwhile)")
		}
	}
	if len(bad) > 0 {
		return sandbox.Errorf(sandbox.ErrPathEscape, "docker: container %s did not get the host directories agentbox checked: %s; refusing it", shortID(cid), strings.Join(bad, "; "))
	}
	return nil
}
