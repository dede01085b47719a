package linux

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/sandbox"
)

// Hibernating a native session would mean saving its process tree with
// CRIU (checkpoint/restore in userspace): the init, pid 1 of the
// session's pid namespace, inside its user namespace, and every command.
// It is refused, by name, for what was measured:
//
//   - where `criu check` fails, CRIU cannot run at all on this host; the
//     refusal carries its errors (criu 3.17, Debian 12's, cannot parse
//     the vDSO of Linux 6.13 and later, which split a vvar_vclock
//     mapping off the vvar one);
//   - where it runs, the session's commands are confined by a landlock
//     domain, which the kernel offers no way to read back: CRIU cannot
//     save it, and a restored session would run its commands unconfined.
//
// What is left is the workspace-only stop: Stop ends the processes and
// keeps the workspace, Client.Rebuild makes a session on it, and
// sandbox.Fork copies it to a new session.

var criuProbe struct {
	once sync.Once
	why  string
}

// criuUnusable says why CRIU cannot run on this host, or "" when
// `criu check` passes. It runs the check once per process.
func criuUnusable() string {
	criuProbe.once.Do(func() {
		path, err := exec.LookPath("criu")
		if err != nil {
			criuProbe.why = "criu is not installed (the Debian package criu)"
			return
		}
		out, err := exec.Command(path, "check").CombinedOutput()
		if err != nil {
			criuProbe.why = fmt.Sprintf("%s check fails on this host (%v): %s", path, err, criuErrors(out))
		}
	})
	return criuProbe.why
}

// criuErrors keeps the "Error" lines of CRIU's output, or all of it.
func criuErrors(out []byte) string {
	var errs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "Error") {
			errs = append(errs, strings.TrimSpace(line))
		}
	}
	if len(errs) == 0 {
		return strings.TrimSpace(string(out))
	}
	return strings.Join(errs, "; ")
}

// hibernateRefusal is why this session cannot hibernate.
func (s *session) hibernateRefusal() string {
	if why := criuUnusable(); why != "" {
		return why
	}
	if ll := s.h.Landlock; ll != "" && !strings.HasPrefix(ll, "landlock unavailable") {
		return "the session's commands are confined by landlock (" + ll + "), whose domains CRIU cannot save or restore: a restored session would run them unconfined"
	}
	return "saving a native session's process tree with CRIU is not implemented"
}

// Hibernate refuses, naming why (see above), and offers the workspace-only
// stop.
func (s *session) Hibernate(ctx context.Context) error {
	if err := s.live("hibernate"); err != nil {
		return err
	}
	return sandbox.Wrap("linux: hibernate", sandbox.ErrUnsupported, fmt.Errorf(
		"session %s: %s; instead, Stop keeps the workspace for Client.Rebuild, and Fork (agentbox session fork) copies it to a new session, both without the processes' memory",
		s.st.ID, s.hibernateRefusal()))
}

// Wake has nothing to restore: Hibernate never saves.
func (s *session) Wake(ctx context.Context) error {
	return sandbox.Wrap("linux: wake", sandbox.ErrUnsupported, errors.New("session "+s.st.ID+" was not hibernated: "+s.hibernateRefusal()))
}
