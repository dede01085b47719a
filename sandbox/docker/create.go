package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/sandbox"
)

// Create starts a session: checks the policy against what the engine
// enforces, prepares the workspace (fresh, given, or restored from a
// snapshot), creates and starts the container.
func (c *Client) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	spec, err := c.normalize(spec)
	if err != nil {
		return nil, err
	}
	id := newSessionID()
	return c.create(ctx, id, spec, "", nil)
}

func newSessionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "dk-" + hex.EncodeToString(b[:])
}

// normalize applies defaults and refuses what cannot be enforced.
func (c *Client) normalize(spec sandbox.Spec) (sandbox.Spec, error) {
	if spec.Workdir == "" {
		spec.Workdir = sandbox.DefaultWorkdir
	}
	if !path.IsAbs(spec.Workdir) || path.Clean(spec.Workdir) == "/" {
		return spec, sandbox.Errorf(sandbox.ErrInvalid, "docker: workdir %q must be an absolute path below /", spec.Workdir)
	}
	spec.Workdir = path.Clean(spec.Workdir)
	if err := sandbox.CheckPorts(spec.Ports); err != nil {
		return spec, sandbox.Wrap("docker: create", sandbox.ErrInvalid, err)
	}
	if spec.Image == "" {
		spec.Image = c.opts.Image
	}
	if why := c.remapsIDs(); why != "" {
		return spec, sandbox.Errorf(sandbox.ErrPolicyUnsupported,
			"docker: the engine at %s %s: what commands create would not belong to the workspace's owner, whom the docker backend runs them as (the engine has no per-container id mapping); use an engine without id remapping, or the native backend", c.host, why)
	}
	if d := spec.Policy.Resources.DiskBytes; d > 0 && spec.Workspace != "" && !spec.AllowWeaker {
		// The workspace it makes is bounded (workspace.go); a directory
		// of the user's is bound as it is.
		return spec, sandbox.Wrap("docker: create", sandbox.ErrPolicyUnsupported, fmt.Errorf(
			"cannot enforce resources.disk (%d bytes) on the workspace %s: the docker backend bounds only a workspace it makes (a tmpfs of that size), and a directory of yours is a host bind mount no container quota covers; leave the workspace unset, use the native backend (an ext4 image of that size), or pass --allow-weaker to run without",
			d, spec.Workspace))
	}
	if _, err := sandbox.Check(Name, c.Enforces(), spec.Policy, spec.AllowWeaker, c.log); err != nil {
		return spec, err
	}
	return spec, nil
}

// create builds the session id's container from spec; workspace, when
// set, is an existing workspace to reuse (Rebuild), and recorded the user
// the session it rebuilds ran as, if known.
func (c *Client) create(ctx context.Context, id string, spec sandbox.Spec, workspace string, recorded *identity) (_ sandbox.Session, err error) {
	if _, err := parseUser(spec.User); err != nil {
		return nil, err
	}
	if err := c.EnsureImage(ctx, spec.Image); err != nil {
		return nil, err
	}
	s := &session{c: c, id: id, spec: spec, created: time.Now().UTC()}
	defer func() {
		if err != nil {
			_ = s.Close(context.WithoutCancel(ctx))
		}
	}()
	// The descriptors are needed until the binds are checked.
	defer s.binds.close()
	if err := s.prepareWorkspace(ctx, workspace, recorded); err != nil {
		return nil, err
	}
	if err := s.openMounts(); err != nil {
		return nil, err
	}
	env := baseEnv(spec.Workdir)
	for k, v := range spec.Env {
		env[k] = v
	}
	profile, err := c.sessionProfile(s.who)
	if err != nil {
		return nil, err
	}
	plan, err := c.planContainer(id, spec, &s.binds, s.who, profile, env)
	if err != nil {
		return nil, err
	}
	s.bindIDs = plan.binds
	if spec.Policy.Network.EffectiveMode() == sandbox.NetworkAllowList {
		down, err := c.attachEgress(ctx, s, &plan)
		if err != nil {
			return nil, err
		}
		s.extraDown = down
	}
	c.log.Debug("docker: create container", "session", id, "image", spec.Image, "user", s.who, "mounts", describeMounts(plan.host))
	created, err := c.api.ContainerCreate(ctx, client.ContainerCreateOptions{Config: plan.config, HostConfig: plan.host, Name: "agentbox-" + id})
	if err != nil {
		return nil, c.unavailable("docker: create container for session "+id, err)
	}
	s.containerID = created.ID
	// The runtime's error for a missing init names no image and no
	// reason; look first.
	if _, err := c.api.ContainerStatPath(ctx, created.ID, client.ContainerStatPathOptions{Path: initCmd[0]}); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, sandbox.Wrap("docker: create session "+id, sandbox.ErrInvalid,
				fmt.Errorf("image %s has no usable %s, which the docker backend runs as the session's init and to track each command", spec.Image, initCmd[0]))
		}
		return nil, c.unavailable("docker: look for "+initCmd[0]+" in container "+shortID(created.ID), err)
	}
	if !spec.Detached {
		// The lifeline, before the start: the init must find its input
		// held. The connection lives until Close, or this process's end.
		att, err := c.api.ContainerAttach(context.WithoutCancel(ctx), created.ID, client.ContainerAttachOptions{Stream: true, Stdin: true})
		if err != nil {
			return nil, c.unavailable("docker: attach the lifeline of container "+shortID(created.ID), err)
		}
		s.lifeline = att.Conn
	}
	if _, err := c.api.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return nil, c.unavailable("docker: start container "+shortID(created.ID), err)
	}
	if err := c.verifyBinds(ctx, created.ID, plan.binds); err != nil {
		return nil, err
	}
	if s.tmpfsDir != "" && !spec.Detached {
		if err := s.detachWorkspace(ctx); err != nil {
			return nil, err
		}
	}
	if t := spec.Policy.Resources.SessionTimeout; t > 0 {
		s.timer = time.AfterFunc(t-time.Since(s.created), s.expire)
	}
	return s, nil
}

func removeWorkspace(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return sandbox.Wrap("docker: remove workspace "+dir, nil, err)
	}
	return nil
}

// removeContainer force-removes a container; one already gone is fine.
func (c *Client) removeContainer(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	_, err := c.api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		return c.unavailable("docker: remove container "+shortID(id), err)
	}
	return nil
}

// Resume reattaches to the session's container when it still exists
// with its workspace (starting it again after Stop). A session whose
// container or workspace is gone is ErrGone: Rebuild makes a new one.
func (c *Client) Resume(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	const op = "docker: resume"
	spec, cid, err := c.stateOf(st)
	if err != nil {
		return nil, err
	}
	h, err := handlesOf(st)
	if err != nil {
		return nil, err
	}
	if cid != "" && (h.InContainer || st.Workspace != "" && dirExists(st.Workspace)) {
		// An in-container workspace is reached through the init the
		// engine names now, not the pid its state recorded.
		insp, err := c.api.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
		state := insp.Container.State
		if err == nil && state != nil && (state.Status == "removing" || state.Status == "dead" || h.InContainer && !state.Running) {
			// On its way out, or stopped with the workspace only it
			// held: gone.
			err = cerrdefs.ErrNotFound
		}
		switch {
		case err == nil:
			var user string
			if insp.Container.Config != nil {
				user = insp.Container.Config.User
			}
			ws := st.Workspace
			if h.InContainer {
				ws = inContainer(state.Pid, spec.Workdir)
			}
			return c.reattach(ctx, st, spec, cid, user, state != nil && state.Running, ws)
		case !cerrdefs.IsNotFound(err):
			return nil, c.unavailable("docker: inspect container "+shortID(cid), err)
		}
	}
	return nil, sandbox.Wrap(op, sandbox.ErrGone, fmt.Errorf("session %s: its container or its workspace is gone; Rebuild makes a new session from its workspace or snapshot", st.ID))
}

// Rebuild makes a new session, under a new id, with the spec of the gone
// session st: a new container over its workspace when that is still
// there, else over a fresh workspace (or the caller's directory, made
// anew) restored from its latest snapshot. A leftover stopped container
// is removed first.
func (c *Client) Rebuild(ctx context.Context, st sandbox.State) (sandbox.Session, error) {
	op := "docker: rebuild " + st.ID
	spec, cid, err := c.stateOf(st)
	if err != nil {
		return nil, err
	}
	h, err := handlesOf(st)
	if err != nil {
		return nil, err
	}
	if cid != "" {
		insp, err := c.api.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
		switch {
		case err == nil && insp.Container.State != nil && insp.Container.State.Running && (h.InContainer || st.Workspace != "" && dirExists(st.Workspace)):
			return nil, sandbox.Wrap(op, sandbox.ErrInvalid, errors.New("the session still runs: Resume it, or Delete it before a rebuild"))
		case err == nil:
			if err := c.removeContainer(ctx, cid); err != nil {
				return nil, err
			}
		case !cerrdefs.IsNotFound(err):
			return nil, c.unavailable("docker: inspect container "+shortID(cid), err)
		}
	}
	var recorded *identity
	if id, ok := parseIdentity(h.User); ok {
		recorded = &id
	}
	if st.Workspace != "" && !h.InContainer && dirExists(st.Workspace) {
		sess, err := c.create(ctx, newSessionID(), spec, st.Workspace, recorded)
		if err == nil {
			s := sess.(*session)
			// It takes over the workspace, and the tmpfs it is in.
			s.ownsWS, s.snapshot, s.tmpfsDir = st.OwnsWorkspace, st.Snapshot, h.TmpfsDir
		}
		return sess, err
	}
	ref := st.Snapshot
	if ref == "" {
		ref = spec.Snapshot
	}
	if ref == "" {
		return nil, sandbox.Wrap(op, sandbox.ErrNotFound, fmt.Errorf("its container and workspace %s are gone and it has no snapshot", st.Workspace))
	}
	spec.Snapshot, spec.Workspace = ref, ""
	if !st.OwnsWorkspace && st.Workspace != "" && !h.InContainer {
		spec.Workspace = st.Workspace // rebuild the caller's directory in place
	}
	return c.create(ctx, newSessionID(), spec, "", recorded)
}

// stateOf checks that st is this backend's and returns its spec, with
// defaults applied, and its container id.
func (c *Client) stateOf(st sandbox.State) (sandbox.Spec, string, error) {
	if st.Backend != Name {
		return sandbox.Spec{}, "", sandbox.Errorf(sandbox.ErrInvalid, "docker: state %s is for backend %q", st.ID, st.Backend)
	}
	spec, err := c.normalize(st.Spec)
	if err != nil {
		return sandbox.Spec{}, "", err
	}
	cid, err := containerOf(st)
	return spec, cid, err
}

// reattach makes a session of the running or stopped container cid,
// whose configured user is user. A stopped one is started again, and its
// binds must be what they were when it was made: the engine binds by
// path again at each start.
//
// ws is where this process reaches the workspace: its host path, or the
// container init's view of one that lives in the container only.
func (c *Client) reattach(ctx context.Context, st sandbox.State, spec sandbox.Spec, cid, user string, running bool, ws string) (sandbox.Session, error) {
	h, err := handlesOf(st)
	if err != nil {
		return nil, err
	}
	who, ok := parseIdentity(user)
	if !ok {
		// A container made by an older agentbox: its user was Spec.User
		// or the default.
		r, err := parseUser(spec.User)
		if err != nil {
			return nil, err
		}
		who = identity{sandbox.DefaultUID, sandbox.DefaultGID}
		if r.set {
			who = r.id
		}
	}
	if !running {
		if _, err := c.api.ContainerStart(ctx, cid, client.ContainerStartOptions{}); err != nil {
			return nil, c.unavailable("docker: restart container "+shortID(cid), err)
		}
		if err := c.verifyBinds(ctx, cid, h.Binds); err != nil {
			timeout := 0
			_, _ = c.api.ContainerStop(context.WithoutCancel(ctx), cid, client.ContainerStopOptions{Timeout: &timeout})
			return nil, sandbox.Wrap("docker: resume "+st.ID, sandbox.ErrGone, fmt.Errorf("%w; Rebuild makes a new session over what the paths name now", err))
		}
	}
	root, err := openFiles(ws, spec.Policy)
	if err != nil {
		return nil, err
	}
	s := &session{c: c, id: st.ID, containerID: cid, spec: spec, who: who, workspace: st.Workspace,
		ownsWS: st.OwnsWorkspace, root: root, created: st.CreatedAt, snapshot: st.Snapshot, bindIDs: h.Binds, tmpfsDir: h.TmpfsDir}
	if ws != st.Workspace {
		if s.held, err = os.Open(ws); err != nil {
			_ = root.Close()
			return nil, sandbox.Wrap("docker: resume "+st.ID, sandbox.ErrGone, err)
		}
	}
	if t := spec.Policy.Resources.SessionTimeout; t > 0 {
		left := t - time.Since(st.CreatedAt)
		if left <= 0 {
			left = time.Millisecond
		}
		s.timer = time.AfterFunc(left, s.expire)
	}
	return s, nil
}

func dirExists(d string) bool {
	fi, err := os.Stat(d)
	return err == nil && fi.IsDir()
}

// Delete removes what st names: its container (by handle and by session
// label) and its workspace when the session owned it.
func (c *Client) Delete(ctx context.Context, st sandbox.State) error {
	var errs []error
	cid, err := containerOf(st)
	if err != nil {
		return err
	}
	if cid != "" {
		if err := c.removeContainer(ctx, cid); err != nil {
			errs = append(errs, err)
		}
	}
	if st.ID != "" {
		list, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelSession+"="+st.ID)})
		if err != nil {
			errs = append(errs, c.unavailable("docker: list containers of session "+st.ID, err))
		}
		for _, ct := range list.Items {
			if err := c.removeContainer(ctx, ct.ID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	h, _ := handlesOf(st)
	if st.OwnsWorkspace && !h.InContainer {
		if err := removeWorkspace(st.Workspace); err != nil {
			errs = append(errs, err)
		}
	}
	if h.TmpfsDir != "" {
		if err := unbound(h.TmpfsDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Alive reports whether the container of the session st describes runs.
func (c *Client) Alive(st sandbox.State) bool {
	cid, err := containerOf(st)
	if err != nil || cid == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineWait)
	defer cancel()
	insp, err := c.api.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
	return err == nil && insp.Container.State != nil && insp.Container.State.Running
}
