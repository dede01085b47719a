// Package scripted is a model provider that plays a recorded plan of tool
// calls and a final answer, for offline demos and deterministic tests. It
// checks, when the plan asks it to, that the tools returned what the plan
// expected, and fails loudly naming the step when they did not.
package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Plan is a list of steps; each model turn plays the next one.
type Plan struct {
	// Source names where the plan came from (its path), for messages.
	Source string
	Steps  []Step
}

// Step is one model turn: tool calls, or a final answer.
type Step struct {
	// Line is the step's line in the plan file (0 if built in code).
	Line int
	// Calls are the tool calls this turn makes; empty for a final answer.
	Calls []Call
	// Final is the final answer's text; it may contain {{output:N}}, the
	// tool output of step N (1-based; several calls' outputs joined by a
	// blank line; for shell tools, only what the command printed).
	Final string
	// IsFinal says this step is the final answer.
	IsFinal bool
	// Expect, when set, is checked against this step's tool outputs when
	// they come back, before the next step is played.
	Expect *Expect
}

// Call is one tool call.
type Call struct {
	Line int
	Tool string
	// Arguments is a JSON object.
	Arguments json.RawMessage
}

// Expect asserts what a step's tool outputs contain. Every call of the
// step must satisfy every assertion that is set.
type Expect struct {
	// OutputContains must appear in the output.
	OutputContains []string
	// OutputNotContains must not appear in the output.
	OutputNotContains []string
	// ExitCode, when set, is the "exit code: N" the shell tools report.
	ExitCode *int
	// Failed, when set, says whether the command must have failed (a
	// non-zero exit code) or succeeded.
	Failed *bool
}

// planYAML and friends are the file's shape; unknown keys are errors.
type planYAML struct {
	Steps []stepYAML `yaml:"steps"`
}

type stepYAML struct {
	Call   *callYAML   `yaml:"call"`
	Calls  []callYAML  `yaml:"calls"`
	Final  *string     `yaml:"final"`
	Expect *expectYAML `yaml:"expect"`
	Line   int         `yaml:"-"`
}

type callYAML struct {
	Tool      string         `yaml:"tool"`
	Arguments map[string]any `yaml:"arguments"`
}

type expectYAML struct {
	OutputContains    stringList `yaml:"output_contains"`
	OutputNotContains stringList `yaml:"output_not_contains"`
	ExitCode          *int       `yaml:"exit_code"`
	Failed            *bool      `yaml:"failed"`
}

// stringList accepts a single string or a list of strings.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = []string{n.Value}
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

// LoadPlan reads and parses a plan file.
func LoadPlan(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: read plan: %w", err)
	}
	p, err := parse(data, path)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// ParsePlan parses a plan: a mapping with a steps list, or just the list.
func ParsePlan(data []byte) (*Plan, error) { return parse(data, "plan") }

func parse(data []byte, source string) (*Plan, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("scripted plan %s: %s", source, fmt.Sprintf(format, args...))
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fail("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil, fail("empty plan")
	}
	top := root.Content[0]
	stepsNode := top
	if top.Kind == yaml.MappingNode {
		// Decode strictly to reject unknown top-level keys with their line.
		var y planYAML
		if err := strictDecode(data, &y); err != nil {
			return nil, fail("%s", err)
		}
		stepsNode = nil
		for i := 0; i+1 < len(top.Content); i += 2 {
			if top.Content[i].Value == "steps" {
				stepsNode = top.Content[i+1]
			}
		}
		if stepsNode == nil {
			return nil, fail("line %d: no steps", top.Line)
		}
	}
	if stepsNode.Kind != yaml.SequenceNode {
		return nil, fail("line %d: steps must be a list", stepsNode.Line)
	}
	if top.Kind == yaml.SequenceNode {
		// Same strict pass as above, so errors carry the file's lines.
		var y []stepYAML
		if err := strictDecode(data, &y); err != nil {
			return nil, fail("%s", err)
		}
	}
	p := &Plan{Source: source}
	for i, n := range stepsNode.Content {
		num := i + 1
		raw, err := yaml.Marshal(n)
		if err != nil {
			return nil, fail("step %d (line %d): %v", num, n.Line, err)
		}
		var y stepYAML
		if err := strictDecode(raw, &y); err != nil {
			return nil, fail("step %d (line %d): %s", num, n.Line, shiftLines(err.Error(), n.Line-1))
		}
		st, err := y.step(n.Line)
		if err != nil {
			return nil, fail("step %d (line %d): %v", num, n.Line, err)
		}
		p.Steps = append(p.Steps, st)
	}
	if len(p.Steps) == 0 {
		return nil, fail("line %d: the plan has no steps", stepsNode.Line)
	}
	for i, st := range p.Steps {
		if st.IsFinal && i != len(p.Steps)-1 {
			return nil, fail("step %d (line %d): a final answer ends the run, but steps follow it", i+1, st.Line)
		}
	}
	if err := p.checkTemplates(); err != nil {
		return nil, fail("%v", err)
	}
	return p, nil
}

func strictDecode(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

var lineRE = regexp.MustCompile(`line (\d+)`)

// shiftLines rewrites "line N" in a sub-document's error to the file's line.
func shiftLines(msg string, offset int) string {
	return lineRE.ReplaceAllStringFunc(msg, func(s string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(s, "line "))
		return "line " + strconv.Itoa(n+offset)
	})
}

func (y stepYAML) step(line int) (Step, error) {
	st := Step{Line: line}
	kinds := 0
	if y.Call != nil {
		kinds++
		y.Calls = append([]callYAML{*y.Call}, y.Calls...)
	}
	if len(y.Calls) > 0 && y.Call == nil {
		kinds++
	}
	if y.Final != nil {
		kinds++
	}
	if kinds != 1 {
		return st, errors.New("a step has exactly one of call, calls or final")
	}
	if y.Final != nil {
		if y.Expect != nil {
			return st, errors.New("expect checks tool outputs; a final answer has none")
		}
		st.Final, st.IsFinal = *y.Final, true
		return st, nil
	}
	for j, c := range y.Calls {
		if c.Tool == "" {
			return st, fmt.Errorf("call %d: tool is required", j+1)
		}
		args := c.Arguments
		if args == nil {
			args = map[string]any{}
		}
		// Without HTML escaping, so "a && b" stays readable in traces.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(args); err != nil {
			return st, fmt.Errorf("call %d (%s): arguments cannot be JSON: %v", j+1, c.Tool, err)
		}
		raw := bytes.TrimRight(buf.Bytes(), "\n")
		st.Calls = append(st.Calls, Call{Line: line, Tool: c.Tool, Arguments: raw})
	}
	if e := y.Expect; e != nil {
		if len(e.OutputContains) == 0 && len(e.OutputNotContains) == 0 && e.ExitCode == nil && e.Failed == nil {
			return st, errors.New("expect is empty (use output_contains, output_not_contains, exit_code or failed)")
		}
		st.Expect = &Expect{OutputContains: e.OutputContains, OutputNotContains: e.OutputNotContains, ExitCode: e.ExitCode, Failed: e.Failed}
	}
	return st, nil
}

var templateRE = regexp.MustCompile(`\{\{\s*output:(\d+)\s*\}\}`)

// checkTemplates makes sure a final answer only names earlier call steps.
func (p *Plan) checkTemplates() error {
	for i, st := range p.Steps {
		for _, m := range templateRE.FindAllStringSubmatch(st.Final, -1) {
			n, _ := strconv.Atoi(m[1])
			if n < 1 || n > i || p.Steps[n-1].IsFinal {
				return fmt.Errorf("step %d (line %d): %s does not name an earlier step with tool calls", i+1, st.Line, m[0])
			}
		}
	}
	return nil
}
