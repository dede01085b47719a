package reconcile_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/agent/model/scripted"
	"github.com/agentbox/agentbox/artifact"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/trace"
)

// exampleFiles are what the agent file refers to; the end-to-end tests
// run a copy so that a failure cannot touch the committed statements, and
// so the copy proves every path resolves against the agent file.
var exampleFiles = []string{"agent.yaml", "plan.yaml", "rules.yaml", "discrepancies.schema.json", "reconcile.py",
	"statements/bank.csv", "statements/ledger.csv", "statements/invoices.csv"}

func copyExample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range exampleFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func linuxClient(t *testing.T) sandbox.Client {
	t.Helper()
	testenv.NeedRoot(t, "the end-to-end reconciliation in the linux backend")
	c, err := linux.New(linux.Options{StateDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		testenv.Skipf(t, "linux backend unavailable: %v", err)
	}
	return c
}

func sha(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// outcome is what one run of the example produced.
type outcome struct {
	res      *agent.Result
	err      error
	rec      *artifact.Record
	dest     string
	events   []trace.Event
	bankHash string // of the host's statements/bank.csv after the run
}

// runExample runs the example's agent file (with plan m, or its own plan
// when m is nil) in the native sandbox and promotes its outputs.
func runExample(t *testing.T, c sandbox.Client, m model.Model) outcome {
	t.Helper()
	dir := copyExample(t)
	file, err := agent.LoadFile(filepath.Join(dir, "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if m == nil {
		if m, err = scripted.Load(file.Model.Plan); err != nil {
			t.Fatal(err)
		}
	}
	file.Agent.Model = m
	rules, err := artifact.LoadRules(file.Artifacts.Rules)
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(t.TempDir(), "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	tracePath := filepath.Join(t.TempDir(), "trace.jsonl")
	tw, err := trace.Create(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	o := outcome{dest: filepath.Join(t.TempDir(), "promoted")}
	cfg := agent.RunConfig{
		Sandbox: agent.SandboxConfig{
			Client: c, Spec: sandbox.Spec{Policy: file.Policy, Workspace: ws},
			ManifestBase: file.Dir, TrustedManifest: true,
		},
		Trace: tw,
		BeforeClose: func(ctx context.Context, sess sandbox.Session, res *agent.Result) error {
			var err error
			o.rec, err = artifact.Promote(ctx, artifact.NewSessionSource(sess), rules, o.dest,
				artifact.PromoteOptions{RunID: res.RunID, TraceID: res.TraceID, NewSession: artifact.FreshSessionLike(c, sess)})
			return err
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o.res, o.err = (&agent.Runner{}).Run(ctx, file.Agent, "Reconcile the client's Q1 statements.", cfg)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if o.events, err = trace.Read(tracePath); err != nil {
		t.Fatal(err)
	}
	o.bankHash = sha(t, filepath.Join(dir, "statements", "bank.csv"))
	return o
}

func TestTheAuditorReconcilesInTheNativeSandbox(t *testing.T) {
	c := linuxClient(t)
	needPython(t)
	before := sha(t, filepath.Join("statements", "bank.csv"))
	o := runExample(t, c, nil)
	if o.err != nil {
		t.Fatalf("run: %v", o.err)
	}

	t.Run("the agent answers with the four discrepancies", func(t *testing.T) {
		if !strings.Contains(o.res.FinalOutput, "4 discrepancies") {
			t.Errorf("final output:\n%s", o.res.FinalOutput)
		}
		if o.res.Usage.TotalTokens != 0 {
			t.Errorf("usage %+v: the scripted model uses no tokens", o.res.Usage)
		}
	})
	t.Run("the agent cannot modify the mounted statements", func(t *testing.T) {
		var tamper *trace.Event
		for i, e := range o.events {
			if e.Type == trace.SandboxExec && strings.Contains(e.Cmd, ">> statements/bank.csv") {
				tamper = &o.events[i]
			}
		}
		if tamper == nil || tamper.ExitCode == nil || *tamper.ExitCode == 0 {
			t.Fatalf("the write to statements/bank.csv did not fail: %+v", tamper)
		}
		for _, e := range o.events {
			if e.Type == trace.ToolResult && e.CallID == tamper.CallID && !strings.Contains(e.Output, "cannot create statements/bank.csv") {
				t.Errorf("the trace does not say why the write failed; the tool's output was %q", e.Output)
			}
		}
		if o.bankHash != before {
			t.Error("the host's statements/bank.csv changed")
		}
	})
	t.Run("the outputs are promoted with provenance", func(t *testing.T) {
		if o.rec == nil {
			t.Fatal("nothing promoted")
		}
		if o.rec.RunID != o.res.RunID || o.rec.TraceID != o.res.TraceID || o.rec.RunID == "" {
			t.Errorf("record run %q trace %q, run was %q %q", o.rec.RunID, o.rec.TraceID, o.res.RunID, o.res.TraceID)
		}
		types := map[string]string{}
		for _, f := range o.rec.Files {
			types[f.Path] = f.Type
			if got := sha(t, filepath.Join(o.dest, f.Path)); got != f.SHA256 {
				t.Errorf("%s: sha256 %s, record says %s", f.Path, got, f.SHA256)
			}
		}
		if types["output/report.md"] != "text/markdown" || types["output/discrepancies.json"] != "application/json" {
			t.Errorf("promoted %v", types)
		}
		if _, err := os.Stat(filepath.Join(o.dest, "agentbox-provenance.json")); err != nil {
			t.Errorf("no provenance record beside the outputs: %v", err)
		}
		got, want := reportedFindings(t, filepath.Join(o.dest, "output", "discrepancies.json")), plantedFindings(t)
		if len(got) != len(want) {
			t.Fatalf("promoted %v, planted %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("promoted %v, planted %v", got[i], want[i])
			}
		}
	})
}

func TestATamperedReportFailsPromotion(t *testing.T) {
	c := linuxClient(t)
	needPython(t)
	tests := []struct {
		name   string
		tamper string
		path   string
		check  string
	}{
		{"a report replaced by a symlink to the statements", "rm output/report.md && ln -s ../statements/bank.csv output/report.md", "output/report.md", ""},
		{"a report replaced by a program", "cp /usr/bin/true output/report.md", "output/report.md", "types"},
		{"discrepancies that break the schema", `echo '{"summary": {}, "discrepancies": "none"}' > output/discrepancies.json`, "output/discrepancies.json", "json_schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := "steps:\n" +
				"  - call: {tool: exec_command, arguments: {cmd: python3 reconcile.py}}\n" +
				"    expect: {exit_code: 0}\n" +
				"  - call: {tool: exec_command, arguments: {cmd: " + yamlQuote(tt.tamper) + "}}\n" +
				"    expect: {exit_code: 0}\n" +
				"  - final: done\n"
			m, err := scripted.Parse([]byte(plan))
			if err != nil {
				t.Fatal(err)
			}
			o := runExample(t, c, m)
			var re *artifact.RejectedError
			if !errors.As(o.err, &re) {
				t.Fatalf("run error %v is not a refused promotion", o.err)
			}
			found := false
			for _, v := range re.Violations {
				if v.Path == tt.path && (tt.check == "" || v.Check == tt.check) {
					found = true
				}
			}
			if !found {
				t.Errorf("no violation of %s (%s) in:\n%v", tt.path, tt.check, re)
			}
			if _, err := os.Stat(o.dest); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the destination exists after a refused promotion: %v", err)
			}
			if o.res == nil || o.res.FinalOutput != "done" {
				t.Errorf("the run itself did not finish: %+v", o.res)
			}
		})
	}
}

// yamlQuote makes s one double-quoted YAML scalar.
func yamlQuote(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
