package kube

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/agentbox/agentbox/sandbox"
)

// An exec's command runs in its container's memory cgroup, whose limit is
// the policy's; when the kernel's OOM killer ends it, all the exec says
// is exit 137, as for any SIGKILL. Nothing in the Pod's status changes
// either (the kubelet reports OOMKilled for a container whose init died,
// not for one of its execs). What tells the two apart is the cgroup's
// oom_kill counter, which the container sees: the exec wrapper records it
// when the command starts, and explainKill reads it again after a SIGKILL
// the backend did not send. The counter is the container's, so an OOM
// kill of another command of the session running at the same time counts
// too (as on the other backends, whose counters are per session); and the
// record at the start is a file of the session's user, which its commands
// could rewrite: a session can make its own commands' reports wrong, not
// another session's.

// explainKill says whether the OOM killer ended the command tagged tag,
// which ended by a SIGKILL the backend did not send (st): when the
// container's OOM-kill counter grew since the command started, or when
// the container itself is gone and the kubelet says the OOM killer ended
// it. Where neither can be read, st is returned as it is, and a warning
// says that the kill's cause is unknown.
func (s *session) explainKill(ctx context.Context, tag string, st sandbox.ExitStatus) sandbox.ExitStatus {
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	out := &sandbox.CappedBuffer{Max: 256}
	err := s.stream(ctx, []string{"/bin/sh", "-c", oomScript, "agentbox-oom", tag}, remotecommand.StreamOptions{Stdout: out, Stderr: io.Discard})
	if err != nil {
		if s.containerOOMKilled(ctx) {
			return oomKilled(st, s.spec.Policy.Resources.MemoryBytes)
		}
		s.c.log.Warn("kube: a SIGKILL agentbox did not send ended a command, and the container's OOM counter could not be read: the cause is unknown", "session", s.id, "err", err)
		return st
	}
	before, now, perr := parseOOMCounts(string(out.Bytes()))
	switch {
	case perr != nil:
		s.c.log.Warn("kube: a SIGKILL agentbox did not send ended a command, and the OOM probe's answer is unreadable: the cause is unknown", "session", s.id, "err", perr)
	case now < 0:
		s.c.log.Warn("kube: a SIGKILL agentbox did not send ended a command, and the container has no oom_kill counter (memory.events, memory.oom_control) to tell an OOM kill from another: the cause is unknown", "session", s.id)
	case before < 0:
		s.c.log.Warn("kube: a SIGKILL agentbox did not send ended a command whose OOM count at start is gone: the cause is unknown", "session", s.id)
	case now > before:
		return oomKilled(st, s.spec.Policy.Resources.MemoryBytes)
	}
	return st
}

// oomKilled is st as the OOM killer's work, under a limit of limit bytes.
func oomKilled(st sandbox.ExitStatus, limit int64) sandbox.ExitStatus {
	st.OOMKilled = true
	st.Violations = append(st.Violations, sandbox.OOMViolation(limit))
	return st
}

// parseOOMCounts reads oomScript's answer: the counter at the command's
// start and now, each -1 when unknown.
func parseOOMCounts(out string) (before, now int64, err error) {
	f := strings.Fields(out)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%q is not two counts", out)
	}
	if before, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("count at start: %w", err)
	}
	if now, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("count now: %w", err)
	}
	return before, now, nil
}

// containerOOMKilled says whether the kubelet reports that the session's
// container ended by the OOM killer: its init was the victim, so the
// session ended with the command.
func (s *session) containerOOMKilled(ctx context.Context) bool {
	pod, err := s.c.cs.CoreV1().Pods(s.h.Namespace).Get(ctx, s.h.Pod, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container && terminatedByOOM(cs) {
			return true
		}
	}
	return false
}

// terminatedByOOM is whether a container's state, or its last one, is
// terminated with the kubelet's reason OOMKilled.
func terminatedByOOM(cs corev1.ContainerStatus) bool {
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t != nil && t.Reason == "OOMKilled" {
			return true
		}
	}
	return false
}
