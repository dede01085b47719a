package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

func TestBuildSpecRejectsBadInputWithAClearReason(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		flags execFlags
		want  string
	}{
		{"a workspace that does not exist", execFlags{workspace: dir + "/nope"}, "--workspace"},
		{"a malformed memory size", execFlags{memory: "lots"}, "--memory"},
		{"a malformed disk size", execFlags{disk: "12X"}, "--disk"},
		{"a negative pids limit", execFlags{pids: -1}, "--pids"},
		{"a negative cpu limit", execFlags{cpus: -2}, "--cpus"},
		{"network none together with an allow-list", execFlags{network: "none,example.com"}, "cannot be combined"},
		{"a bad host in the allow-list", execFlags{network: "exa mple.com"}, "not a host name"},
		{"an env entry without =", execFlags{env: []string{"NOEQUALS"}}, "KEY=VALUE"},
		{"a mount source that does not exist", execFlags{ro: []string{dir + "/missing"}}, "--ro"},
		{"a mount onto a path outside the sandbox layout", execFlags{ro: []string{dir + ":/etc/passwd"}}, "outside the sandbox layout"},
		{"two mounts on one target", execFlags{ro: []string{dir + ":x"}, rw: []string{dir + ":x"}}, "two mounts"},
		{"a non-numeric user", execFlags{user: "root"}, "--user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.flags.buildSpec()
			if err == nil {
				t.Fatalf("buildSpec accepted %+v", tt.flags)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestBuildSpecMapsFlagsOntoThePolicy(t *testing.T) {
	dir := t.TempDir()
	f := execFlags{
		workspace: dir, ro: []string{dir + ":data"}, rw: []string{dir + ":/mnt/out"},
		network: "api.example.com,*.pypi.org", memory: "512M", disk: "1G", pids: 64, cpus: 1.5,
		env: []string{"A=1", "B=x=y"}, user: "1234:1234",
	}
	spec, err := f.buildSpec()
	if err != nil {
		t.Fatal(err)
	}
	r := spec.Policy.Resources
	if r.MemoryBytes != 512<<20 || r.DiskBytes != 1<<30 || r.Pids != 64 || r.CPUs != 1.5 {
		t.Errorf("resources = %+v", r)
	}
	if n := spec.Policy.Network; n.Mode != sandbox.NetworkAllowList || len(n.Allow) != 2 {
		t.Errorf("network = %+v", n)
	}
	want := []sandbox.Mount{
		{Source: dir, Target: "/workspace/data", ReadOnly: true},
		{Source: dir, Target: "/mnt/out", ReadOnly: false},
	}
	if len(spec.Mounts) != 2 || spec.Mounts[0] != want[0] || spec.Mounts[1] != want[1] {
		t.Errorf("mounts = %+v, want %+v", spec.Mounts, want)
	}
	if spec.Env["B"] != "x=y" || spec.Env["A"] != "1" || spec.User != "1234:1234" || spec.Workspace != dir {
		t.Errorf("spec = %+v", spec)
	}
}

func TestStatusOfMapsTimeoutAndOOM(t *testing.T) {
	for st, want := range map[*sandbox.ExitStatus]int{
		{ExitCode: 3}:                    3,
		{ExitCode: 137, TimedOut: true}:  exitTimedOut,
		{ExitCode: 137, OOMKilled: true}: exitKilled,
	} {
		if got := statusOf(*st); got != want {
			t.Errorf("statusOf(%+v) = %d, want %d", *st, got, want)
		}
	}
}

func TestExecIOCheckRefusesWhatCannotWork(t *testing.T) {
	tests := []struct {
		name string
		eio  execIO
		want string
	}{
		{"a negative timeout is refused", execIO{timeout: -time.Second}, "--timeout"},
		{"a terminal without a terminal on stdin is refused", execIO{tty: true, stdin: strings.NewReader("print(1)")}, "--tty needs a terminal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.eio.check(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("check() = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestInspectionFlagsReachThePolicy(t *testing.T) {
	f := execFlags{
		network: "api.github.com,api.openai.com", memory: "0",
		inspect:     []string{"api.github.com"},
		rules:       []string{"GET,HEAD api.github.com/repos/acme/**"},
		credentials: []string{"api.openai.com=placeholder:OPENAI_API_KEY:env:OPENAI_API_KEY"},
	}
	spec, err := f.buildSpec()
	if err != nil {
		t.Fatal(err)
	}
	n := spec.Policy.Network
	if len(n.Inspect) != 1 || len(n.Rules) != 1 || n.Rules[0].Paths[0] != "/repos/acme/**" ||
		len(n.Secrets) != 1 || n.Secrets[0].Kind != sandbox.CredPlaceholder || n.Secrets[0].Name != "OPENAI_API_KEY" {
		t.Errorf("network = %+v", n)
	}
	if err := spec.Policy.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for name, bad := range map[string]execFlags{
		"a malformed rule":       {network: "a.com", rules: []string{"a.com"}},
		"a malformed credential": {network: "a.com", credentials: []string{"a.com=bearer:value:sk"}},
	} {
		if _, err := bad.buildSpec(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	spec, err = (&execFlags{network: "none", credentials: []string{"a.com=bearer:env:X"}}).buildSpec()
	if err == nil {
		err = spec.Policy.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "allow-list") {
		t.Errorf("a credential without an allow-list: %v", err)
	}
}
