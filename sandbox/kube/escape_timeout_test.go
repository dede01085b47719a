//go:build kube

package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/attacktest"
	"github.com/agentbox/agentbox/sandbox"
)

// The native backend's attacks on an exec's timeout, in a Pod: what the
// command started must die with it. A daemon that double-forks out of its
// session is left out: it is reparented to the Pod's init, where the kill
// cannot tell it from another command's, and only the session's timeout
// ends it (see killScript).
func TestEscapeOutlivingTheExecTimeoutFails(t *testing.T) {
	s := escapeSession(t, escapeClient(t), sandbox.Spec{})
	ws := sandbox.DefaultWorkdir
	cases := []struct{ name, script string }{
		{"a background child", "sleep 100 & echo $! > " + ws + "/p.pid; sleep 100"},
		{"a setsid'ed child", "setsid sh -c 'echo $$ > " + ws + "/p.pid; exec sleep 100' & sleep 100"},
		{"a process that ignores SIGTERM and SIGHUP", "sh -c 'trap \"\" TERM HUP INT; echo $$ > " + ws + "/p.pid; while :; do sleep 1; done' & sleep 100"},
		{"a process that keeps forking", "sh -c 'echo $$ > " + ws + "/p.pid; while :; do (sleep 100 &); done' & sleep 100"},
		{"a stopped process", "sh -c 'echo $$ > " + ws + "/p.pid; kill -STOP $$' & sleep 100"},
	}
	for _, c := range cases {
		t.Run(c.name+" dies", func(t *testing.T) {
			podSh(t, s, "rm -f "+ws+"/p.pid")
			start := time.Now()
			r := attacktest.Exec(t, s, sandbox.ExecRequest{Cmd: []string{"sh", "-c", c.script}, Timeout: 2 * time.Second})
			if !r.TimedOut {
				t.Errorf("TimedOut = false (exit %d)", r.ExitCode)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the exec returned %s after a 2s timeout", d)
			}
			// Every process but the init, its sleep and this scan's own
			// (its exec wrapper, the parent, included).
			left := podSh(t, s, `[ -s `+ws+`/p.pid ] || exit 3; for d in /proc/[0-9]*; do p=${d#/proc/}; `+
				`[ "$p" = 1 ] || [ "$p" = $$ ] || [ "$p" = $PPID ] && continue; st=$(cat $d/stat 2>/dev/null) || continue; st=${st##*) }; set -- $st; `+
				`[ "$2" = 1 ] && [ "$4" = 1 ] && continue; [ "$3" = Z ] && continue; `+
				`a=$(tr '\0' ' ' < $d/cmdline 2>/dev/null) && [ -n "$a" ] && echo "$p $a"; done | grep -a -v -e '^[0-9]* tr ' -e '^[0-9]* grep ' -e '^[0-9]* cat ' -e 'p.pid ] || exit 3'`)
			if left.ExitCode == 3 {
				t.Fatalf("the command never wrote its pid file (the timeout came first?)")
			}
			if out := strings.TrimSpace(string(left.Stdout)); out != "" {
				t.Errorf("ESCAPE: processes outlived the timeout:\n%s", out)
				podSh(t, s, "kill -KILL -1")
			}
		})
	}
}
