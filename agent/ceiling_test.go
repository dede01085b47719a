package agent

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// shellIn is exec_command bound to a fresh local session under pol.
func shellIn(t *testing.T, sh *Shell, pol sandbox.Policy) Tool {
	t.Helper()
	c := newClient(t)
	s, err := c.Create(context.Background(), sandbox.Spec{Workspace: t.TempDir(), Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sh.CloseSession(context.Background(), s)
		_ = s.Close(context.Background())
	})
	return sh.Tools(s)[0]
}

func TestPolicyLimitsAreCeilingsAToolCallCanOnlyLower(t *testing.T) {
	second := sandbox.Policy{Resources: sandbox.Resources{ExecTimeout: time.Second}}
	smallOutput := sandbox.Policy{Resources: sandbox.Resources{OutputBytes: 100}}
	const slow = `"sleep 3; echo survived"`
	const chatty = `"head -c 5000 /dev/zero | tr '\\0' x"`
	tests := []struct {
		name   string
		shell  *Shell
		policy sandbox.Policy
		args   string
		want   []string // substrings of the tool's output
		check  func(t *testing.T, out string)
	}{
		{"the policy's timeout ends a command under the shell's own default", &Shell{}, second,
			`{"cmd": ` + slow + `}`, []string{"timed out: killed after 1s"}, nil},
		{"a call asking for more time than the policy gets the policy's", &Shell{}, second,
			`{"cmd": ` + slow + `, "timeout_ms": 60000}`, []string{"timed out: killed after 1s"}, nil},
		{"a shell configured for longer than the policy gets the policy's", &Shell{Timeout: time.Hour, MaxTimeout: 2 * time.Hour}, second,
			`{"cmd": ` + slow + `, "timeout_ms": 3600000}`, []string{"timed out: killed after 1s"}, nil},
		{"a call may lower the policy's timeout", &Shell{}, second,
			`{"cmd": ` + slow + `, "timeout_ms": 200}`, []string{"timed out: killed after 200ms"}, nil},
		{"a call asking for more output than the policy gets the policy's cap", &Shell{}, smallOutput,
			`{"cmd": ` + chatty + `, "max_output_tokens": 100000}`, []string{"…[truncated "}, func(t *testing.T, out string) {
				if n := strings.Count(out, "x"); n > 100 {
					t.Errorf("%d bytes of output reached the model; the policy caps it at 100", n)
				}
			}},
		{"a call may lower the policy's output cap", &Shell{}, smallOutput,
			`{"cmd": ` + chatty + `, "max_output_tokens": 5}`, []string{"…[truncated "}, func(t *testing.T, out string) {
				if n := strings.Count(out, "x"); n > 20 {
					t.Errorf("%d bytes of output reached the model; the call asked for 20", n)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exec := shellIn(t, tt.shell, tt.policy)
			start := time.Now()
			out, err := exec.Call(context.Background(), []byte(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "survived") || time.Since(start) > 2500*time.Millisecond {
				t.Fatalf("the command outlived its limit (%s): %q", time.Since(start), out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

// TestEveryPolicyLimitIsClassified keeps the test above complete: each
// resource limit is either one a tool argument reaches (and is tested
// there as a ceiling) or one that belongs to the session, which no tool
// argument names (the backends' conformance suite tests its enforcement).
// A new limit fails this test until someone decides which it is.
func TestEveryPolicyLimitIsClassified(t *testing.T) {
	toolReachable := map[string]string{
		"ExecTimeout": "exec_command's timeout_ms and the Shell's Timeout and MaxTimeout",
		"OutputBytes": "exec_command's and write_stdin's max_output_tokens",
	}
	sessionOnly := map[string]bool{"MemoryBytes": true, "Pids": true, "CPUs": true, "DiskBytes": true, "SessionTimeout": true, "IdleTimeout": true}
	rt := reflect.TypeOf(sandbox.Resources{})
	for i := range rt.NumField() {
		name := rt.Field(i).Name
		if _, ok := toolReachable[name]; !ok && !sessionOnly[name] {
			t.Errorf("Resources.%s is new: if a tool argument can reach it, make the tool bound it by the policy and test it above; else list it as session-only", name)
		}
	}
	for _, spec := range []Tool{{Spec: execCommandSpec}, {Spec: writeStdinSpec}} {
		for name := range sessionOnly {
			if strings.Contains(strings.ToLower(string(spec.Spec.Parameters)), strings.ToLower(name)) {
				t.Errorf("%s has a parameter about %s, a session-only limit", spec.Spec.Name, name)
			}
		}
	}
}
