package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"github.com/moby/moby/client"
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
