package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"
)

// Reaped is one container GC removed, and why.
type Reaped struct {
	Container string
	Session   string
	Reason    string
}

// GCOptions control GC.
type GCOptions struct {
	// DryRun lists what would be removed without removing it.
	DryRun bool
}

// GC removes agentbox containers (those labelled agentbox.session) that
// are orphans: created on this host by a process that no longer exists
// (a crashed agentbox whose container the engine did not remove with it),
// or with no owner at all. Containers of live agentbox processes
// (running, still starting), detached sessions (Spec.Detached: they
// outlive their maker until removed), and other hosts' containers are
// left alone.
func (c *Client) GC(ctx context.Context, opts GCOptions) ([]Reaped, error) {
	list, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelSession)})
	if err != nil {
		return nil, c.unavailable("docker: gc: list agentbox containers", err)
	}
	me := hostname()
	var out []Reaped
	var errs []error
	for _, ct := range list.Items {
		reason := ""
		pid, _ := strconv.Atoi(ct.Labels[labelOwnerPID])
		switch {
		case ct.Labels[labelDetached] == "true":
			continue // it outlives its maker: session rm removes it
		case ct.Labels[labelOwnerHost] != me:
			continue // another host's agentbox: its pid means nothing here
		case pid <= 0:
			reason = "no owner pid label"
		case !processAlive(pid):
			reason = fmt.Sprintf("owner process %d is gone (container %s)", pid, ct.State)
		default:
			continue
		}
		r := Reaped{Container: shortID(ct.ID), Session: ct.Labels[labelSession], Reason: reason}
		if !opts.DryRun {
			if err := c.removeContainer(ctx, ct.ID); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		out = append(out, r)
	}
	nets, err := c.api.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", labelSession)})
	if err != nil {
		errs = append(errs, c.unavailable("docker: gc: list agentbox networks", err))
	}
	for _, n := range nets.Items {
		pid, _ := strconv.Atoi(n.Labels[labelOwnerPID])
		if n.Labels[labelOwnerHost] == me && pid > 0 && processAlive(pid) {
			continue
		}
		if opts.DryRun {
			out = append(out, Reaped{Container: "network " + n.Name, Session: n.Labels[labelSession], Reason: "orphaned egress network"})
			continue
		}
		if _, err := c.api.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
			errs = append(errs, c.unavailable("docker: gc: remove network "+n.Name, err))
			continue
		}
		out = append(out, Reaped{Container: "network " + n.Name, Session: n.Labels[labelSession], Reason: "orphaned egress network"})
	}
	ws, err := c.gcWorkspaces(ctx, opts.DryRun)
	out = append(out, ws...)
	if err != nil {
		errs = append(errs, err)
	}
	if !opts.DryRun && c.egressSupport() == "" {
		if err := reapBridgeRules(func(msg string) { c.log.Info("docker: gc: " + msg) }); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// processAlive reports whether pid exists (EPERM means it does, owned by
// someone else).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// orphanAge is how old a workspace directory must be before GC counts it
// an orphan: younger, it may be one a live process is still making.
const orphanAge = 2 * time.Minute

// gcWorkspaces removes the temporary workspace directories (and the tmpfs
// mounted on one) of sessions that have no container any more: what an
// agentbox killed while it made a session, or one not root (whose
// workspace is a plain directory) left. Only directories of the name
// prepareWorkspace makes, older than orphanAge, and, not root, this
// user's own, are considered.
func (c *Client) gcWorkspaces(ctx context.Context, dryRun bool) ([]Reaped, error) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), workspacePrefix+"*"))
	if err != nil {
		return nil, err
	}
	var out []Reaped
	var errs []error
	for _, dir := range dirs {
		var st unix.Stat_t
		// As root, a workspace given to its session user is this
		// program's too; what RemoveAll removes is only ever what the
		// directory holds (it follows no link).
		if unix.Lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || os.Geteuid() != 0 && int(st.Uid) != os.Geteuid() ||
			time.Since(time.Unix(st.Mtim.Unix())) < orphanAge {
			continue
		}
		id, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), workspacePrefix), "-")
		if !ok || id == "" {
			continue
		}
		list, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelSession+"="+id)})
		if err != nil {
			errs = append(errs, c.unavailable("docker: gc: list containers of session "+id, err))
			continue
		}
		if len(list.Items) > 0 {
			continue
		}
		r := Reaped{Container: "workspace " + dir, Session: id, Reason: "its session has no container"}
		if !dryRun {
			// A tmpfs on it is detached first; what is left is a plain
			// directory of this user's (RemoveAll does not follow a
			// link at its top).
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPERM) {
				errs = append(errs, fmt.Errorf("docker: gc: unmount %s: %w", dir, err))
				continue
			}
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("docker: gc: remove %s: %w", dir, err))
				continue
			}
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}
