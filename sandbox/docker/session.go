package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/egress"
	"github.com/agentbox/agentbox/sandbox/wsfs"
)

// handles is the docker backend's part of a sandbox.State.
type handles struct {
	// Container is the session's container id.
	Container string `json:"container"`
	// User is the uid:gid commands run as, the workspace's owner when
	// the session was made: a Rebuild that must remake the directory
	// makes it owned by them again.
	User string `json:"user,omitempty"`
	// Binds is what each bind target was when the container was made;
	// a restart of the stopped container must find the same.
	Binds map[string]fileID `json:"binds,omitempty"`
	// TmpfsDir is the host mount point of the tmpfs of a workspace the
	// session made, while the host holds it (a detached session).
	TmpfsDir string `json:"tmpfs_dir,omitempty"`
	// InContainer says the workspace the session made lives in its
	// container only (a session of a process): its host path names
	// nothing; the container's init reaches it.
	InContainer bool `json:"in_container,omitempty"`
}

// containerOf is the container id st names, a version 1 state's included.
func containerOf(st sandbox.State) (string, error) {
	h, err := handlesOf(st)
	return h.Container, err
}

// handlesOf is st's docker part, a version 1 state's included.
func handlesOf(st sandbox.State) (handles, error) {
	var h handles
	err := sandbox.DecodeHandles(st, &h, func(old map[string]string) error {
		h.Container = old["container"]
		return nil
	})
	return h, err
}

// ContainerID is the id of the container of the docker session st
// describes, for tools that inspect it.
func ContainerID(st sandbox.State) (string, error) { return containerOf(st) }

// session is one container.
type session struct {
	c           *Client
	id          string
	containerID string
	spec        sandbox.Spec
	who         identity
	workspace   string
	binds       bindSet           // what the container binds, held while it is made
	bindIDs     map[string]fileID // what its bind targets were when it was made
	ownsWS      bool
	root        *wsfs.Root
	created     time.Time

	mu        sync.Mutex
	snapshot  string
	closed    bool
	expired   bool
	stopped   bool   // Stop was called
	deadWhy   string // set when agentbox killed the whole container
	oomSeen   int64
	timer     *time.Timer
	extraDown func() // releases the egress attachment, if any
	// lifeline is the attachment of the init's input that ends the
	// session with this process (see ownedInitCmd); nil for a detached
	// session, or one this process resumed.
	lifeline net.Conn
	// tmpfsDir is the host mount point of the workspace's tmpfs while
	// the host holds it (workspace.go); held is the workspace's
	// directory once only the container and this descriptor do.
	tmpfsDir string
	held     *os.File
	proxy    *egress.Proxy
	watches  wsfs.Watches
}

func (s *session) ID() string { return s.id }

func (s *session) workdirOf(dir string) string {
	switch {
	case dir == "":
		return s.spec.Workdir
	case path.IsAbs(dir):
		return path.Clean(dir)
	}
	return path.Join(s.spec.Workdir, dir)
}

// live reports ErrClosed or ErrTimeout when the session cannot run more.
func (s *session) live() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return sandbox.Wrap("docker: session "+s.id, sandbox.ErrClosed, errors.New("session is closed"))
	case s.expired:
		return sandbox.Wrap("docker: session "+s.id, sandbox.ErrTimeout, fmt.Errorf("session exceeded its %s limit and was stopped", s.spec.Policy.Resources.SessionTimeout))
	}
	return nil
}

// Start runs a command in the container and streams it.
func (s *session) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := s.live(); err != nil {
		return nil, err
	}
	p, err := s.start(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.Stdin != nil {
		sandbox.FeedStdin(p, req.Stdin)
	}
	return p, nil
}

// execError classifies a failed exec call: a container that is gone or
// stopped is said so plainly, an engine that does not answer names
// DOCKER_HOST.
func (s *session) execError(what string, err error) error {
	op := "docker: " + what + " in container " + shortID(s.containerID)
	if client.IsErrConnectionFailed(err) || isConnRefused(err) {
		return s.c.unavailable(op, err)
	}
	if alive := s.checkAlive(context.WithoutCancel(context.Background())); alive != nil {
		return alive
	}
	return sandbox.Wrap(op, kindOf(err), err)
}

// checkAlive reports a container that was removed or stopped behind
// agentbox's back as a clear error.
func (s *session) checkAlive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	insp, err := s.c.api.ContainerInspect(ctx, s.containerID, client.ContainerInspectOptions{})
	removed := cerrdefs.IsNotFound(err)
	var gone string // how the container is not running
	switch st := insp.Container.State; {
	case removed:
		// A session of a process is removed by the engine once it
		// stops (AutoRemove): what stopped it says more.
		gone = fmt.Sprintf("container %s is gone", shortID(s.containerID))
	case err != nil:
		return s.c.unavailable("docker: inspect container "+shortID(s.containerID), err)
	case st != nil && st.Paused:
		return s.pausedError()
	case st != nil && !st.Running:
		gone = fmt.Sprintf("container %s is %s (exit code %d)", shortID(s.containerID), st.Status, st.ExitCode)
		if st.OOMKilled {
			gone += ", killed by the OOM killer"
		}
	default:
		return nil
	}
	op := "docker: session " + s.id
	s.mu.Lock()
	why, expired, stopped := s.deadWhy, s.expired, s.stopped
	s.mu.Unlock()
	switch {
	case why != "":
		return sandbox.Wrap(op, sandbox.ErrClosed, errors.New("container was killed by agentbox: "+why))
	case expired:
		return sandbox.Wrap(op, sandbox.ErrTimeout, errors.New(gone+" after the session timeout"))
	case stopped:
		return sandbox.Wrap(op, sandbox.ErrClosed, errors.New(gone+": the session was stopped"))
	case removed:
		return sandbox.Wrap(op, sandbox.ErrClosed, errors.New(gone+": stopped or removed outside agentbox"))
	}
	return sandbox.Wrap(op, sandbox.ErrClosed, errors.New(gone+": stopped or killed outside agentbox"))
}

// goneWithin is for a sign that the container died (an exec the engine
// could not start, a probe that failed), which the engine notes a moment
// after the kernel, taking execs that cannot start meanwhile. It asks the
// engine until it calls the container gone (that error), or a probe exec
// runs in it (nil: it takes execs, and what failed did so on its own: a
// workdir that does not exist, a full pids limit), or d has passed, or the
// engine does not answer (nil: nothing is known).
func (s *session) goneWithin(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := s.checkAlive(ctx)
		if errors.Is(err, sandbox.ErrUnavailable) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := s.helperOutput(ctx, "start probe", rootUser, []string{"true"}); err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil
		}
	}
}

func (s *session) killedWhy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadWhy
}

// killAll SIGKILLs the container (all of the session's processes) and
// records why for the errors that follow. It gives the engine
// engineWait; an error means the processes may still run.
func (s *session) killAll(ctx context.Context, why string) error {
	s.mu.Lock()
	s.deadWhy = why
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), engineWait)
	defer cancel()
	_, err := s.c.api.ContainerKill(ctx, s.containerID, client.ContainerKillOptions{Signal: "KILL"})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		// Not found or not running (a conflict) is what was wanted.
		return s.c.unavailable("docker: kill container "+shortID(s.containerID), err)
	}
	return nil
}

func (s *session) isExpired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expired
}

// rootUser is who the helpers that only read run as: root in the
// container, with no capabilities like every process there, which a
// command of another uid cannot signal, so it cannot SIGSTOP them (in the
// session of a root-owned workspace commands are root too and can: the
// helpers' deadline covers that, as for the killer). The killer cannot be
// one of them: without CAP_KILL root may not signal another uid either,
// so it runs as the session user (see killTree).
var rootUser = identity{0, 0}

// helperOutput runs a short agentbox command (the killer, the OOM probe),
// named what for errors, in the container as who and returns its
// output; a non-zero exit is an error. It gives up after helperWait, or
// when ctx ends, even on a helper that was stopped or never ends: the
// attach stream does not heed the context, so it is closed. A helper
// given up on may stay in the container, stopped; the container's end
// ends it.
func (s *session) helperOutput(ctx context.Context, what string, who identity, cmd []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, helperWait)
	defer cancel()
	late := func() error {
		return fmt.Errorf("the %s did not finish: %w", what, ctx.Err())
	}
	created, err := s.c.api.ExecCreate(ctx, s.containerID, client.ExecCreateOptions{User: who.String(), Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		if ctx.Err() != nil {
			return nil, late()
		}
		return nil, s.execError("create "+what+" exec", err)
	}
	att, err := s.c.api.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return nil, late()
		}
		return nil, s.execError("attach "+what+" exec", err)
	}
	defer att.Close()
	defer context.AfterFunc(ctx, att.Close)()
	var out, errb bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &errb, att.Reader)
	if ctx.Err() != nil {
		return out.Bytes(), late()
	}
	if err != nil {
		return nil, s.execError("read "+what+" exec", err)
	}
	for {
		insp, err := s.c.api.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return out.Bytes(), late()
			}
			return nil, s.execError("inspect "+what+" exec", err)
		}
		if !insp.Running {
			if insp.ExitCode != 0 {
				said := strings.TrimSpace(errb.String())
				if said == "" {
					// The engine writes why it could not start an
					// exec to its output.
					said = strings.TrimSpace(out.String())
				}
				return out.Bytes(), fmt.Errorf("the %s exited %d: %s", what, insp.ExitCode, said)
			}
			return out.Bytes(), nil
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return out.Bytes(), late()
		}
	}
}

// oomKilledSince reads the container's cgroup OOM-kill counter (v1
// memory.oom_control or v2 memory.events, both visible read-only inside
// the container) and reports whether it grew since the last look.
func (s *session) oomKilledSince(ctx context.Context) (bool, error) {
	out, err := s.helperOutput(ctx, "OOM probe", rootUser, []string{"/bin/sh", "-c", "cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || cat /sys/fs/cgroup/memory.events"})
	if err != nil {
		return false, err
	}
	var n int64 = -1
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			n, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if n < 0 {
		return false, fmt.Errorf("no oom_kill counter in the container's memory cgroup")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	grew := n > s.oomSeen
	s.oomSeen = n
	return grew, nil
}

// State is the serializable description of the session.
func (s *session) State() sandbox.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sandbox.State{
		Version:       sandbox.StateVersion,
		Backend:       Name,
		ID:            s.id,
		Spec:          s.spec,
		Workspace:     s.workspace,
		OwnsWorkspace: s.ownsWS,
		Snapshot:      s.snapshot,
		Handles: sandbox.EncodeHandles(handles{Container: s.containerID, User: s.who.String(), Binds: s.bindIDs,
			TmpfsDir: s.tmpfsDir, InContainer: s.held != nil}),
		CreatedAt: s.created,
	}
}

// Snapshot saves the workspace, minus mounts inside it, to the store.
func (s *session) Snapshot(ctx context.Context) (string, error) {
	if s.c.opts.Snapshots == nil {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "docker: snapshot: the client has no snapshot store")
	}
	if err := s.live(); err != nil {
		return "", err
	}
	var exclude []string
	for _, m := range s.spec.Mounts {
		if rel, err := sandbox.ResolveWorkspacePath(s.spec.Workdir, m.Target); err == nil && rel != "." {
			exclude = append(exclude, rel)
		}
	}
	// Bounded by what the workspace may hold: --disk, or the size of
	// the tmpfs of one the session made.
	bound := s.spec.Policy.Resources.DiskBytes
	if bound <= 0 && s.ownsWS && (s.held != nil || s.tmpfsDir != "") {
		bound = defaultWorkspaceBytes
	}
	ref, err := s.c.opts.Snapshots.Save(ctx, s.filesPath(), exclude, bound)
	if err != nil {
		return "", sandbox.Wrap("docker: snapshot session "+s.id, nil, err)
	}
	s.mu.Lock()
	s.snapshot = ref
	s.mu.Unlock()
	return ref, nil
}

// Stop kills every process of the session by stopping the container. A
// detached session's container and workspace stay, so Resume can start
// it again; the engine removes a session of a process once it stops
// (AutoRemove), and Resume then says ErrGone (Rebuild makes a new one
// over the workspace).
func (s *session) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	timeout := 0
	_, err := s.c.api.ContainerStop(ctx, s.containerID, client.ContainerStopOptions{Timeout: &timeout})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return s.c.unavailable("docker: stop container "+shortID(s.containerID), err)
	}
	if !s.spec.Detached {
		// The engine removes it now (AutoRemove): once Stop returns,
		// a Resume finds it gone rather than half removed.
		wctx, cancel := context.WithTimeout(ctx, engineWait)
		defer cancel()
		for {
			_, err := s.c.api.ContainerInspect(wctx, s.containerID, client.ContainerInspectOptions{})
			if cerrdefs.IsNotFound(err) || wctx.Err() != nil {
				return nil
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-wctx.Done():
			}
		}
	}
	return nil
}

// Close removes the container and, if the session created it, the
// workspace. It is idempotent.
func (s *session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	down := s.extraDown
	s.mu.Unlock()
	var errs []error
	// Bounded: an engine that does not answer must not hold Close,
	// nor the workspace removal after it, forever.
	rctx, cancel := context.WithTimeout(ctx, removeWait)
	err := s.c.removeContainer(rctx, s.containerID)
	cancel()
	if err != nil {
		errs = append(errs, err)
	}
	if down != nil {
		down()
	}
	if s.lifeline != nil {
		_ = s.lifeline.Close()
	}
	s.watches.End()
	if s.root != nil {
		_ = s.root.Close()
	}
	s.binds.close()
	if s.ownsWS && s.held == nil {
		if err := removeWorkspace(s.workspace); err != nil {
			errs = append(errs, err)
		}
	}
	if s.held != nil {
		_ = s.held.Close()
	}
	if s.tmpfsDir != "" {
		if err := unbound(s.tmpfsDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// expire ends a session that passed its SessionTimeout: its container is
// killed and later calls fail with ErrTimeout.
func (s *session) expire() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.expired = true
	s.mu.Unlock()
	s.c.log.Warn("docker: session timeout reached, killing its container", "session", s.id, "limit", s.spec.Policy.Resources.SessionTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.c.api.ContainerKill(ctx, s.containerID, client.ContainerKillOptions{Signal: "KILL"})
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
