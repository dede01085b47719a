package agent

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/agentbox/agentbox/internal/bytesize"
	"github.com/agentbox/agentbox/sandbox"
)

// SandboxPrompt is the built-in start of every agent's instructions, unless
// the agent sets BaseInstructions.
const SandboxPrompt = `You are an agent working inside a confined sandbox. Your actions are tool calls that run in the sandbox session, not on the user's machine.
- The workspace is your working directory (%s). Read inputs there and write every output there; files outside it are not yours to change, and read-only inputs stay read-only.
- The network is unavailable unless the task says otherwise; do not try to reach it.
- Commands run with limits on time, memory and output. Prefer short, non-interactive commands, and check their exit codes.
- Tool output may be cut; a "…[truncated N bytes]…" marker says how much. Narrow your command (grep, head, tail) rather than repeating it.
- When the task is done, reply with your final answer as plain text and no tool call.`

// BuildInstructions assembles the system prompt in its fixed order: the
// sandbox prompt (or the agent's BaseInstructions), the agent's
// instructions, each capability's fragment, then the workspace tree.
func BuildInstructions(a *SandboxAgent, caps []Capability, workdir, tree string) string {
	if workdir == "" {
		workdir = sandbox.DefaultWorkdir
	}
	var parts []string
	if a.BaseInstructions != "" {
		parts = append(parts, strings.TrimSpace(a.BaseInstructions))
	} else {
		parts = append(parts, fmt.Sprintf(SandboxPrompt, workdir))
	}
	if s := strings.TrimSpace(a.Instructions); s != "" {
		parts = append(parts, s)
	}
	for _, c := range caps {
		if s := strings.TrimSpace(c.Instructions()); s != "" {
			parts = append(parts, s)
		}
	}
	if tree != "" {
		parts = append(parts, "# Workspace\n"+tree)
	}
	return strings.Join(parts, "\n\n")
}

// TreeOptions bound the rendered workspace tree.
type TreeOptions struct {
	MaxDepth   int // default 3
	MaxEntries int // default 200
}

// RenderTree lists the session's workspace as an indented tree, through
// Session.ListDir so that it works with every backend. Directories deeper
// than MaxDepth and entries past MaxEntries are summarized, not listed.
func RenderTree(ctx context.Context, sess sandbox.Session, workdir string, opt TreeOptions) (string, error) {
	if opt.MaxDepth <= 0 {
		opt.MaxDepth = 3
	}
	if opt.MaxEntries <= 0 {
		opt.MaxEntries = 200
	}
	if workdir == "" {
		workdir = sandbox.DefaultWorkdir
	}
	var b strings.Builder
	b.WriteString(workdir + "/\n")
	n := 0
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		entries, err := sess.ListDir(ctx, dir)
		if err != nil {
			return err
		}
		indent := strings.Repeat("  ", depth+1)
		for i, e := range entries {
			if n >= opt.MaxEntries {
				fmt.Fprintf(&b, "%s… (%d more entries not shown)\n", indent, len(entries)-i)
				return nil
			}
			n++
			switch {
			case e.IsDir:
				fmt.Fprintf(&b, "%s%s/\n", indent, e.Name)
				if depth+1 >= opt.MaxDepth {
					continue
				}
				if err := walk(path.Join(dir, e.Name), depth+1); err != nil {
					fmt.Fprintf(&b, "%s  (unreadable: %v)\n", indent, err)
				}
			case e.Target != "":
				fmt.Fprintf(&b, "%s%s -> %s\n", indent, e.Name, e.Target)
			default:
				fmt.Fprintf(&b, "%s%s (%s)\n", indent, e.Name, bytesize.Format(e.Size))
			}
		}
		return nil
	}
	if err := walk(workdir, 0); err != nil {
		return "", fmt.Errorf("render workspace tree of %s: %w", workdir, err)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}
