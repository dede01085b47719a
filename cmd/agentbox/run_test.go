package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

const runAgentFile = `name: counter
instructions: Count the rows of data/in.csv and write output/report.md.
manifest:
  entries:
    data/in.csv:
      file: {content: "a,1\nb,2\nc,3\n"}
    output:
      dir: {}
model:
  provider: scripted
  plan: plan.yaml
approvals:
  - tool: exec_command
    match: "^rm "
`

const runPlan = `steps:
  - call: {tool: exec_command, arguments: {cmd: "wc -l < data/in.csv"}}
    expect: {output_contains: "3", exit_code: 0}
  - call:
      tool: apply_patch
      arguments:
        input: |
          *** Begin Patch
          *** Add File: output/report.md
          +# Report
          +REPORT_BODY
          *** End Patch
  - call: {tool: exec_command, arguments: {cmd: "rm -f data/in.csv"}}
  - final: "rows: {{output:1}}"
`

const runRules = `outputs:
  - glob: output/report.md
    max_size: 100
    types: [text/markdown]
    required: true
    validate: grep -q rows "$1"
`

// agentDir writes an agent file, plan and rules; body is the report's
// second line.
func agentDir(t *testing.T, body string, withArtifacts bool) string {
	t.Helper()
	dir := t.TempDir()
	file := runAgentFile
	if withArtifacts {
		file += "artifacts: {rules: rules.yaml, to: promoted}\n"
	}
	for name, content := range map[string]string{
		"agent.yaml": file,
		"plan.yaml":  strings.Replace(runPlan, "REPORT_BODY", body, 1),
		"rules.yaml": runRules,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(agentboxBinary(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.Stdin = nil // no terminal: approvals are denied
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// linuxBackend skips unless the native backend can run here.
func linuxBackend(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "the linux backend")
	out, _, code := runCLI(t, "exec", "--backend", "linux", "--", "true")
	if code != 0 {
		testenv.Skipf(t, "the linux backend cannot start sessions on this host: %s", out)
	}
}

func TestRunPrintsProgressAndTheFinalAnswer(t *testing.T) {
	dir := agentDir(t, "3 rows", false)
	tracePath := filepath.Join(dir, "run.jsonl")
	stdout, stderr, code := runCLI(t, "run", "--agent", filepath.Join(dir, "agent.yaml"), "--backend", "local", "--allow-weaker", "--trace", tracePath, "count the rows")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.TrimSpace(stdout) != "rows: 3" {
		t.Errorf("stdout %q, want the final answer", stdout)
	}
	for _, want := range []string{
		"turn 1  exec_command  wc -l < data/in.csv  exit 0  ",
		"turn 2  apply_patch  output/report.md  ok",
		"turn 3  exec_command  rm -f data/in.csv  not run (denied)",
		"no terminal to ask: denied",
		"trace: " + tracePath,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	show, _, code := runCLI(t, "trace", "show", tracePath)
	if code != 0 || !strings.Contains(show, "exec wc -l < data/in.csv  exit 0") || !strings.Contains(show, "approval denied") {
		t.Errorf("trace show (exit %d):\n%s", code, show)
	}
}

func TestRunFailsClearly(t *testing.T) {
	dir := agentDir(t, "x", false)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"without an agent file", []string{"run", "task"}, "--agent FILE is required"},
		{"with an agent file that has an unknown key", []string{"run", "--agent", writeFile(t, "name: a\nbogus: 1\n"), "task"}, "agent file: line 2: unknown key bogus (known here: name, instructions"},
		{"with a plan that runs out of steps", []string{"run", "--agent", filepath.Join(dir, "agent.yaml"), "--backend", "local", "--allow-weaker", "--plan", writeFile(t, "steps:\n  - call: {tool: exec_command, arguments: {cmd: 'true'}}\n"), "task"}, "plan"},
		{"with a model server that is down", []string{"run", "--agent", filepath.Join(dir, "agent.yaml"), "--backend", "local", "--allow-weaker", "--provider", "openai-chat", "--base-url", "http://127.0.0.1:1/v1", "task"}, "http://127.0.0.1:1/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, append(tt.args, "--trace", filepath.Join(t.TempDir(), "t.jsonl"))...)
			if code != 125 {
				t.Errorf("exit %d, want 125", code)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr)
			}
		})
	}
}

func TestRunPromotesOutputsInTheLinuxSandbox(t *testing.T) {
	linuxBackend(t)
	t.Run("a report that passes the rules is promoted with provenance", func(t *testing.T) {
		dir := agentDir(t, "3 rows", true)
		stdout, stderr, code := runCLI(t, "run", "--agent", filepath.Join(dir, "agent.yaml"), "--json", "--trace", filepath.Join(dir, "t.jsonl"), "count")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		var res struct {
			FinalOutput string `json:"final_output"`
			Turns       int    `json:"turns"`
			TraceID     string `json:"trace_id"`
			Promoted    *struct {
				TraceID string                  `json:"trace_id"`
				Files   []struct{ Path string } `json:"files"`
			} `json:"promoted"`
		}
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("--json output: %v\n%s", err, stdout)
		}
		if res.FinalOutput != "rows: 3" || res.Turns != 4 || res.Promoted == nil || res.Promoted.TraceID != res.TraceID {
			t.Fatalf("result %+v", res)
		}
		b, err := os.ReadFile(filepath.Join(dir, "promoted", "output", "report.md"))
		if err != nil || !strings.Contains(string(b), "3 rows") {
			t.Fatalf("promoted report: %q %v", b, err)
		}
		// The provenance record says what made the report: the agent, its
		// model, the task, the policy and the hash of every input.
		data, err := os.ReadFile(filepath.Join(dir, "promoted", "agentbox-provenance.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			TraceID         string `json:"trace_id"`
			AgentboxVersion string `json:"agentbox_version"`
			Run             struct {
				Agent, Provider, Model, Task string
				Policy                       map[string]any
				Inputs                       []struct{ Path, Kind, SHA256 string }
			}
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("a,1\nb,2\nc,3\n"))
		r := rec.Run
		if rec.TraceID != res.TraceID || rec.AgentboxVersion == "" || r.Agent != "counter" || r.Provider != "scripted" || r.Model != "plan.yaml" ||
			r.Task != "count" || r.Policy == nil || len(r.Inputs) != 1 || r.Inputs[0].Path != "data/in.csv" || r.Inputs[0].SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("provenance record:\n%s", data)
		}
	})
	t.Run("a report its validate command rejects is not promoted", func(t *testing.T) {
		dir := agentDir(t, "no count", true)
		_, stderr, code := runCLI(t, "run", "--agent", filepath.Join(dir, "agent.yaml"), "--trace", filepath.Join(dir, "t.jsonl"), "count")
		if code != 125 || !strings.Contains(stderr, `validate: command "grep -q rows \"$1\"" exited 1`) {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "promoted")); !os.IsNotExist(err) {
			t.Fatalf("destination exists after a refused promotion: %v", err)
		}
	})
	t.Run("a report that breaks the rules is not promoted and the run fails", func(t *testing.T) {
		dir := agentDir(t, strings.Repeat("padding ", 40), true)
		_, stderr, code := runCLI(t, "run", "--agent", filepath.Join(dir, "agent.yaml"), "--trace", filepath.Join(dir, "t.jsonl"), "count")
		if code != 125 || !strings.Contains(stderr, "max_size") {
			t.Fatalf("exit %d, stderr:\n%s", code, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "promoted")); !os.IsNotExist(err) {
			t.Fatalf("destination exists after a refused promotion: %v", err)
		}
	})
}

func TestRunResumesASavedSession(t *testing.T) {
	linuxBackend(t)
	dir := agentDir(t, "3 rows", false)
	ws, state := filepath.Join(dir, "ws"), filepath.Join(dir, "state.json")
	if _, stderr, code := runCLI(t, "run", "-q", "--agent", filepath.Join(dir, "agent.yaml"), "--workspace", ws, "--save-state", state, "--trace", filepath.Join(dir, "1.jsonl"), "count"); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	plan2 := writeFile(t, "steps:\n  - call: {tool: read_file, arguments: {path: output/report.md}}\n  - final: \"{{output:1}}\"\n")
	stdout, stderr, code := runCLI(t, "run", "-q", "--agent", filepath.Join(dir, "agent.yaml"), "--resume", state, "--plan", plan2, "--trace", filepath.Join(dir, "2.jsonl"), "read it back")
	if code != 0 || !strings.Contains(stdout, "3 rows") {
		t.Fatalf("resumed run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestARunResumedFromASnapshotCanWrite: a run that saved its state and a
// snapshot, its own temporary workspace gone with it, is resumed in a new
// process: the store opens for the snapshot the state names, the session
// is rebuilt from it, and the agent can write in what was restored.
func TestARunResumedFromASnapshotCanWrite(t *testing.T) {
	linuxBackend(t)
	dir := agentDir(t, "3 rows", false)
	store, state := filepath.Join(dir, "store"), filepath.Join(dir, "state.json")
	if _, stderr, code := runCLI(t, "run", "-q", "--agent", filepath.Join(dir, "agent.yaml"), "--store", store, "--save-snapshot", "--save-state", state, "--trace", filepath.Join(dir, "1.jsonl"), "count"); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	plan2 := writeFile(t, `steps:
  - call: {tool: exec_command, arguments: {cmd: "echo more >> output/report.md && echo new > output/new.txt && cat output/new.txt"}}
    expect: {exit_code: 0, output_contains: "new"}
  - final: "wrote"
`)
	stdout, stderr, code := runCLI(t, "run", "-q", "--agent", filepath.Join(dir, "agent.yaml"), "--store", store, "--resume", state, "--plan", plan2, "--trace", filepath.Join(dir, "2.jsonl"), "write more")
	if code != 0 || !strings.Contains(stdout, "wrote") {
		t.Fatalf("resumed run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestRunQuietPrintsOnlyTheAnswer(t *testing.T) {
	linuxBackend(t)
	dir := agentDir(t, "3 rows", true)
	stdout, stderr, code := runCLI(t, "run", "-q", "--agent", filepath.Join(dir, "agent.yaml"), "--trace", filepath.Join(dir, "run.jsonl"), "count the rows")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.TrimSpace(stdout) != "rows: 3" {
		t.Errorf("stdout %q, want the final answer", stdout)
	}
	for _, noise := range []string{"turn 1", "PATH", "promoted 1 file", "report: ", "trace: "} {
		if strings.Contains(stderr, noise) {
			t.Errorf("-q printed %q:\n%s", noise, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "promoted", "output", "report.md")); err != nil {
		t.Errorf("-q changed what the run did, not only what it said: %v", err)
	}
}

func TestRunInterruptedExitsAsAShellReportsCtrlC(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for name, content := range map[string]string{
		"agent.yaml": "name: sleeper\nmodel: {provider: scripted, plan: plan.yaml}\n",
		"plan.yaml":  "steps:\n  - call: {tool: exec_command, arguments: {cmd: \"touch started; sleep 30\"}}\n  - final: never\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(agentboxBinary(t), "run", "--agent", filepath.Join(dir, "agent.yaml"), "--backend", "local", "--allow-weaker", "--workspace", ws, "--trace", filepath.Join(dir, "run.jsonl"), "sleep")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the command never started:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130 as for Ctrl-C; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say the run was interrupted:\n%s", stderr.String())
	}
}

// A run killed while a command runs (SIGKILL: no cleanup, only what was
// saved before) is resumed in a new process: the command that had begun
// is not run a second time, so its side effect happens once; the model
// reads that it was interrupted, and the progress and the trace say so.
func TestRunKilledDuringACommandDoesNotRunItAgainOnResume(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	state := filepath.Join(dir, "run-state.json")
	for name, content := range map[string]string{
		"agent.yaml": "name: appender\nmodel: {provider: scripted, plan: plan.yaml}\n",
		// The command appends its line, then waits until the test lets it
		// end (the killed run leaves it behind, in its own process group).
		"plan.yaml": "steps:\n  - call: {tool: exec_command, arguments: {cmd: \"echo once >> log.txt; while [ ! -e go ]; do sleep 0.05; done\"}}\n  - final: checked\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agentFile := filepath.Join(dir, "agent.yaml")
	cmd := exec.Command(agentboxBinary(t), "run", "--agent", agentFile, "--backend", "local", "--allow-weaker", "--workspace", ws,
		"--save-run", state, "--trace", filepath.Join(dir, "t1.jsonl"), "append once")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(ws, "go"), nil, 0o644) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, _ := os.ReadFile(filepath.Join(ws, "log.txt")); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the command never ran:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// A command run again by the resumed run would end at once.
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	trace2 := filepath.Join(dir, "t2.jsonl")
	stdout, stderr2, code := runCLI(t, "run", "--agent", agentFile, "--backend", "local", "--allow-weaker",
		"--resume", state, "--save-run", state, "--trace", trace2)
	if code != 0 || strings.TrimSpace(stdout) != "checked" {
		t.Fatalf("resumed run: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr2)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "log.txt")); err != nil || string(b) != "once\n" {
		t.Errorf("log.txt = %q (%v): the command that had begun ran again", b, err)
	}
	if !strings.Contains(stderr2, "turn 1  exec_command  echo once >> log.txt") || !strings.Contains(stderr2, "interrupted when the run stopped; not run again") {
		t.Errorf("the resumed run's progress does not say the call was interrupted:\n%s", stderr2)
	}
	data, err := os.ReadFile(trace2)
	if err != nil || !strings.Contains(string(data), `"interrupted":true`) {
		t.Errorf("the trace does not mark the call interrupted (%v):\n%s", err, data)
	}
}

func TestRunGivesTheAgentTheUsersCache(t *testing.T) {
	linuxBackend(t)
	tests := []struct {
		name, file string
		flags      []string
	}{
		{"named by --cache", "name: cached\nmodel: {provider: scripted, plan: plan.yaml}\n", []string{"--cache", "pip"}},
		{"named by the agent file", "name: cached\ncaches: [pip]\nmodel: {provider: scripted, plan: plan.yaml}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("AGENTBOX_HOME", home)
			if err := os.MkdirAll(filepath.Join(home, "caches", "pip"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "caches", "pip", "wheel"), []byte("from an earlier session\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for name, content := range map[string]string{
				"agent.yaml": tt.file,
				"plan.yaml": "steps:\n  - call: {tool: exec_command, arguments: {cmd: 'cat \"$PIP_CACHE_DIR/wheel\"'}}\n" +
					"    expect: {output_contains: \"from an earlier session\", exit_code: 0}\n  - final: done\n",
			} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"run", "-q", "--agent", filepath.Join(dir, "agent.yaml"), "--trace", filepath.Join(dir, "run.jsonl")}, tt.flags...)
			stdout, stderr, code := runCLI(t, append(args, "read the cache")...)
			if code != 0 || strings.TrimSpace(stdout) != "done" {
				t.Fatalf("exit %d, stdout %q; the agent did not find the user's cache:\n%s", code, stdout, stderr)
			}
		})
	}
}

// A run that needs an approval nobody is there to give stops with the call
// pending, and a new process continues it from --save-run's file: the
// conversation, the turn count and the workspace carry over.
func TestRunStoppedForApprovalContinuesInANewProcess(t *testing.T) {
	dir := agentDir(t, "3 rows", false)
	ws := filepath.Join(dir, "ws")
	state := filepath.Join(dir, "run-state.json")
	agentFile := filepath.Join(dir, "agent.yaml")
	_, stderr, code := runCLI(t, "run", "--agent", agentFile, "--backend", "local", "--allow-weaker", "--workspace", ws,
		"--save-run", state, "--approval-wait", "--trace", filepath.Join(dir, "t1.jsonl"), "count the rows")
	if code != 125 || !strings.Contains(stderr, "the run stops with the call pending") || !strings.Contains(stderr, "--resume "+state) {
		t.Fatalf("first run: exit %d, stderr:\n%s", code, stderr)
	}
	var saved struct {
		Turns   int
		Pending []struct{ Arguments string }
	}
	data, err := os.ReadFile(state)
	if err != nil || json.Unmarshal(data, &saved) != nil || saved.Turns != 3 || len(saved.Pending) != 1 || !strings.Contains(saved.Pending[0].Arguments, "rm -f data/in.csv") {
		t.Fatalf("saved run state (%v):\n%s", err, data)
	}

	stdout, stderr, code := runCLI(t, "run", "--agent", agentFile, "--backend", "local", "--allow-weaker",
		"--resume", state, "--save-run", state, "--trace", filepath.Join(dir, "t2.jsonl"))
	if code != 0 || strings.TrimSpace(stdout) != "rows: 3" {
		t.Fatalf("resumed run: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "turn 3  exec_command  rm -f data/in.csv  not run (denied)") || !strings.Contains(stderr, "turn 4  final answer") {
		t.Errorf("the resumed run did not ask for the pending call, then go on at turn 4:\n%s", stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "output", "report.md")); err != nil || !strings.Contains(string(b), "3 rows") {
		t.Errorf("the first run's report is not in the workspace: %q %v", b, err)
	}
}

// A run whose state cannot be saved (--save-run into a directory that is
// not there) stops before its call runs: a resume from the last state
// saved would run again a call that ran unrecorded.
func TestRunWhoseStateCannotBeSavedStopsBeforeItsCall(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for name, content := range map[string]string{
		"agent.yaml": "name: appender\nmodel: {provider: scripted, plan: plan.yaml}\n",
		"plan.yaml":  "steps:\n  - call: {tool: exec_command, arguments: {cmd: \"echo ran >> log.txt\"}}\n  - final: done\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, stderr, code := runCLI(t, "run", "--agent", filepath.Join(dir, "agent.yaml"), "--backend", "local", "--allow-weaker", "--workspace", ws,
		"--save-run", filepath.Join(dir, "missing", "run-state.json"), "--trace", filepath.Join(dir, "t.jsonl"), "append")
	if code == 0 || !strings.Contains(stderr, "save run state") || !strings.Contains(stderr, "the run stops") {
		t.Fatalf("exit %d; want the run failed for its state, stderr:\n%s", code, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "log.txt")); err == nil {
		t.Errorf("the call ran although its start could not be saved: log.txt = %q", b)
	}
}
