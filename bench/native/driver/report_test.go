package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestSplice(t *testing.T) {
	doc := "# Bench\n\n" + beginMarker + "\nold figures\n" + endMarker + "\n\nNotes stay.\n"
	got, err := splice([]byte(doc), []byte("\nnew table\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Bench\n\n" + beginMarker + "\nnew table\n" + endMarker + "\n\nNotes stay.\n"
	if string(got) != want {
		t.Errorf("splice =\n%s\nwant\n%s", got, want)
	}
	for _, bad := range []string{"no markers", endMarker + beginMarker} {
		if _, err := splice([]byte(bad), nil); err == nil {
			t.Errorf("splice(%q): no error", bad)
		}
	}
}

func TestBwrapArgsConfineLikeASession(t *testing.T) {
	a := strings.Join(bwrapArgs("bwrap", "/ws", "true"), " ")
	for _, want := range []string{"--unshare-all", "--cap-drop ALL", "--uid 1000", "--proc /proc", "--dev /dev",
		"--tmpfs /tmp", "--bind /ws /workspace", "--chdir /workspace", "--remount-ro /", "--ro-bind-try /etc/ssl /etc/ssl"} {
		if !strings.Contains(a, want) {
			t.Errorf("bwrap arguments lack %q: %s", want, a)
		}
	}
	if !strings.HasSuffix(a, " true") {
		t.Errorf("bwrap arguments do not end with the command: %s", a)
	}
}

func TestUnshareArgsMakeTheSessionsNamespaces(t *testing.T) {
	got := unshareArgs("unshare", "true")
	for _, ns := range []string{"--mount", "--pid", "--net", "--ipc", "--uts", "--cgroup", "--fork"} {
		if !slices.Contains(got, ns) {
			t.Errorf("unshare arguments lack %s: %v", ns, got)
		}
	}
}

func TestRowsJudgeTheTargets(t *testing.T) {
	dur := func(ms ...int) series {
		var s series
		for _, m := range ms {
			s.add(time.Duration(m) * time.Millisecond)
		}
		return s
	}
	cold := &coldResult{}
	// agentbox, bwrap, bwrap in a cgroup, unshare, true, --help, -noop,
	// full, bwrap in a cgroup with the filter, agentbox with state on tmpfs
	for _, s := range []series{dur(30), dur(10), dur(25), dur(8), dur(1), dur(5), dur(2), dur(60), dur(21), dur(28)} {
		cold.cmds = append(cold.cmds, &s)
	}
	r := &results{
		cold:    cold,
		live:    &liveResult{bare: dur(1), exec: dur(4)},
		idleCLI: &idleResult{mem: procMem{PSS: 4 << 20}},
		many:    &manyResult{n: 3},
	}
	got := map[string]string{}
	for _, x := range r.rows() {
		if x.result != "" {
			got[x.target] = x.result
		}
	}
	want := map[string]string{"≤ 1.5x bwrap": "**FAIL**", "≤ 1.5x bwrap confining alike": "pass", "< +2 ms": "**FAIL**", "< 8 MiB": "pass", "0 failures": "pass"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("target %q judged %q, want %q", k, got[k], v)
		}
	}
}

// The bwrap peer that confines alike really runs under agentbox's filter:
// a nested user namespace, which bwrap alone allows, is refused.
func TestBwrapPeerRunsUnderTheSeccompFilter(t *testing.T) {
	bwrap := testenv.NeedCommand(t, "bwrap")
	prog, err := seccompProgram()
	if err != nil {
		testenv.Skipf(t, "no seccomp filter on this architecture: %v", err)
	}
	ws := t.TempDir()
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	run := func(filter []byte) error {
		argv := bwrapArgs(bwrap, ws)
		cmd := exec.Command(argv[0], argv[1:]...)
		if filter != nil {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := w.Write(filter); err != nil {
				t.Fatal(err)
			}
			w.Close()
			cmd.ExtraFiles = []*os.File{r}
			cmd.Args = append(cmd.Args, "--seccomp", "3")
		}
		cmd.Args = append(cmd.Args, "unshare", "--user", "true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if err := run(nil); err != nil {
		testenv.Skipf(t, "bwrap cannot nest a user namespace here, so the filter's refusal would prove nothing: %v", err)
	}
	if err := run(prog); err == nil {
		t.Fatal("unshare --user succeeded under agentbox's seccomp filter")
	}
}
