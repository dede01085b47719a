package artifact

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
)

// RecordName is the provenance record written beside promoted files.
const RecordName = "agentbox-provenance.json"

// RecordVersion is the version of the Record format: 2 added Run.
const RecordVersion = 2

// Version is the agentbox version named in records; by default the main
// module's version from the build info. The CLI may set it at link time.
var Version = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}()

// Record is the provenance of one promotion, written as RecordName.
type Record struct {
	Version         int          `json:"version"`
	RunID           string       `json:"run_id,omitempty"`
	TraceID         string       `json:"trace_id,omitempty"`
	Time            time.Time    `json:"time"`
	AgentboxVersion string       `json:"agentbox_version"`
	Source          string       `json:"source"`
	Files           []FileRecord `json:"files"`
	// Run says what made the files, when the promoter knows: the agent,
	// its model, the task, the policy and the inputs.
	Run *RunRecord `json:"run,omitempty"`
}

// RunRecord is the agent run a promotion's files came from.
type RunRecord struct {
	Agent string `json:"agent"`
	// Provider and Model name the model asked ("openai-responses",
	// "gpt-4.1"); ModelsAnswered are the models the provider said
	// answered, when it says.
	Provider       string   `json:"provider"`
	Model          string   `json:"model"`
	ModelsAnswered []string `json:"models_answered,omitempty"`
	// Task is the run's input, as the user gave it.
	Task string `json:"task"`
	// Policy is the sandbox policy the run was held to (credentials are
	// never serialized).
	Policy sandbox.Policy `json:"policy"`
	// Inputs are the hashes of what the manifest put before the agent
	// (files written or copied, every file of a mount, git commits).
	// Empty when the run resumed a session whose inputs an earlier run
	// recorded.
	Inputs []manifest.Input `json:"inputs"`
}

// FileRecord is one promoted file.
type FileRecord struct {
	// Path is where the file is, relative to the destination (and to the
	// workspace it came from).
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Type is the content type detected from the bytes.
	Type string `json:"type"`
	// SourcePath is where it was read: a host or sandbox path.
	SourcePath string `json:"source_path"`
	// Checks are the rule checks it passed.
	Checks []Check `json:"checks"`
}

// Check is one rule check's result.
type Check struct {
	// Rule is the output's glob.
	Rule string `json:"rule"`
	// Name is the check: glob, regular_file, hard_links, max_size, types,
	// json_schema, validate.
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// ErrRejected is the kind of a promotion refused by its rules.
var ErrRejected = errors.New("artifact rejected")

// Violation is one file breaking one rule (Path is empty for a required
// output that matched nothing).
type Violation struct {
	Path  string `json:"path,omitempty"`
	Rule  string `json:"rule"`
	Check string `json:"check"`
	Msg   string `json:"message"`
}

func (v Violation) String() string {
	if v.Path == "" {
		return fmt.Sprintf("rule %q: %s: %s", v.Rule, v.Check, v.Msg)
	}
	return fmt.Sprintf("%s: rule %q: %s: %s", v.Path, v.Rule, v.Check, v.Msg)
}

// RejectedError lists every violation of a refused promotion; nothing
// was promoted. errors.Is(err, ErrRejected) and sandbox.ErrInvalid hold.
type RejectedError struct {
	Violations []Violation
}

func (e *RejectedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "artifact: promotion refused, nothing promoted (%d violation", len(e.Violations))
	if len(e.Violations) != 1 {
		b.WriteByte('s')
	}
	b.WriteString("):")
	for _, v := range e.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// Unwrap exposes the kinds.
func (e *RejectedError) Unwrap() []error { return []error{ErrRejected, sandbox.ErrInvalid} }
