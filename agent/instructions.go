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
// the agent sets BaseInstructions. Its verbs are, in order: the working
// directory, what the network reaches, and the limits commands run under
// (see SandboxFacts), so that the model is told what holds in its session.
const SandboxPrompt = `You are an agent working inside a confined sandbox. Your actions are tool calls that run in the sandbox session, not on the user's machine.
- The workspace is your working directory (%s). Read inputs there and write every output there; files outside it are not yours to change, and what the workspace tree marks read-only stays read-only.
- %s
- %s Prefer short, non-interactive commands, and check their exit codes.
- Tool output may be cut; a "…[truncated N bytes]…" marker says how much. Narrow your command (grep, head, tail) rather than repeating it.
- When the task is done, reply with your final answer as plain text and no tool call.`

// BuildInstructions assembles the system prompt in its fixed order: the
// sandbox prompt (or the agent's BaseInstructions) told the policy pol of
// the session, the agent's instructions, each capability's fragment, then
// the workspace tree.
func BuildInstructions(a *SandboxAgent, caps []Capability, workdir, tree string, pol sandbox.Policy) string {
	if workdir == "" {
		workdir = sandbox.DefaultWorkdir
	}
	var parts []string
	if a.BaseInstructions != "" {
		parts = append(parts, strings.TrimSpace(a.BaseInstructions))
	} else {
		network, limits := SandboxFacts(pol)
		parts = append(parts, fmt.Sprintf(SandboxPrompt, workdir, network, limits))
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

// SandboxFacts describes, for the model, what the network of a session
// under pol reaches and the limits its commands run under: one sentence
// each.
func SandboxFacts(pol sandbox.Policy) (network, limits string) {
	switch pol.Network.EffectiveMode() {
	case sandbox.NetworkAllowList:
		network = "The network reaches only these hosts: " + strings.Join(pol.Network.Allow, ", ") +
			", through the proxy that HTTPS_PROXY and HTTP_PROXY name (most tools use it by themselves); any other host is refused and the refusal is recorded."
		network += inspectionFacts(pol.Network)
	case sandbox.NetworkHost:
		network = "The network is not restricted."
	default:
		network = "There is no network (loopback only); do not try to reach other hosts."
	}
	r := pol.Resources
	var l []string
	if r.ExecTimeout > 0 {
		l = append(l, fmt.Sprintf("each command is killed after %s (timeout_ms can shorten it, not lengthen it)", r.ExecTimeout))
	}
	if r.SessionTimeout > 0 {
		l = append(l, fmt.Sprintf("the whole session ends after %s", r.SessionTimeout))
	}
	if r.MemoryBytes > 0 {
		l = append(l, "memory is capped at "+bytesize.Format(r.MemoryBytes)+" for all commands together")
	}
	if r.Pids > 0 {
		l = append(l, fmt.Sprintf("at most %d processes and threads run at once", r.Pids))
	}
	if r.CPUs > 0 {
		l = append(l, fmt.Sprintf("CPU is capped at %g cores", r.CPUs))
	}
	if r.DiskBytes > 0 {
		l = append(l, "the workspace holds at most "+bytesize.Format(r.DiskBytes))
	}
	if r.OutputBytes > 0 {
		l = append(l, "a command's output is cut at "+bytesize.Format(r.OutputBytes))
	}
	if len(l) == 0 {
		return network, "Commands run with limits on time, memory and output."
	}
	return network, "Commands run with limits: " + strings.Join(l, "; ") + "."
}

// TreeOptions bound the rendered workspace tree.
type TreeOptions struct {
	MaxDepth   int // default 3
	MaxEntries int // default 200
}

// treeMarks are the notes the tree puts after a sandbox path: how it is
// mounted, and what the policy says of it, as manifest.Render does.
func treeMarks(st sandbox.State) map[string]string {
	marks := map[string]string{}
	for _, m := range st.Spec.Mounts {
		if m.ReadOnly {
			marks[path.Clean(m.Target)] = "read-only mount"
		} else {
			marks[path.Clean(m.Target)] = "read-write mount"
		}
	}
	for _, p := range st.Spec.Policy.Filesystem.ReadOnly {
		marks[path.Clean(p)] = "read-only"
	}
	for _, p := range st.Spec.Policy.Filesystem.Deny {
		marks[path.Clean(p)] = "denied: neither readable nor writable"
	}
	return marks
}

// RenderTree lists the session's workspace as an indented tree, through
// Session.ListDir so that it works with every backend. Mounts are marked
// "(read-only mount)" or "(read-write mount)", and the policy's read-only
// and denied paths say so. Directories deeper than MaxDepth and entries
// past MaxEntries are summarized, not listed.
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
	marks := treeMarks(sess.State())
	note := func(p string) string {
		if m, ok := marks[p]; ok {
			return "  (" + m + ")"
		}
		return ""
	}
	var b strings.Builder
	b.WriteString(workdir + "/" + note(path.Clean(workdir)) + "\n")
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
			p := path.Join(dir, e.Name)
			switch {
			case e.IsDir:
				fmt.Fprintf(&b, "%s%s/%s\n", indent, e.Name, note(p))
				if depth+1 >= opt.MaxDepth {
					continue
				}
				if err := walk(p, depth+1); err != nil {
					fmt.Fprintf(&b, "%s  (unreadable: %v)\n", indent, err)
				}
			case e.Target != "":
				fmt.Fprintf(&b, "%s%s -> %s%s\n", indent, e.Name, e.Target, note(p))
			default:
				fmt.Fprintf(&b, "%s%s (%s)%s\n", indent, e.Name, bytesize.Format(e.Size), note(p))
			}
		}
		return nil
	}
	if err := walk(workdir, 0); err != nil {
		return "", fmt.Errorf("render workspace tree of %s: %w", workdir, err)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// inspectionFacts tells the model what the proxy adds and checks on
// inspected hosts, so that it uses placeholders as given and does not
// look for keys it will never see.
func inspectionFacts(n sandbox.NetworkPolicy) string {
	var out []string
	var ph, added []string
	for _, c := range n.Secrets {
		if c.Kind == sandbox.CredPlaceholder {
			ph = append(ph, "$"+c.Name+" (for "+c.Host+")")
		} else {
			added = append(added, c.Host+c.PathPrefix)
		}
	}
	if len(added) > 0 {
		out = append(out, " The proxy adds the credentials for "+strings.Join(added, ", ")+" itself: send requests there without one.")
	}
	if len(ph) > 0 {
		out = append(out, " "+strings.Join(ph, ", ")+" hold placeholders the proxy replaces by the real key toward that host only; use them as keys, and never send them elsewhere (that is refused and recorded).")
	}
	if len(n.Rules) > 0 {
		rules := make([]string, len(n.Rules))
		for i, r := range n.Rules {
			rules[i] = r.String()
		}
		out = append(out, " Only these requests are allowed to those hosts: "+strings.Join(rules, "; ")+".")
	}
	return strings.Join(out, "")
}
