package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/agentbox/agentbox/agent"
	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/agent/model/openai"
	"github.com/agentbox/agentbox/agent/model/scripted"
)

// openModel builds the model an agent file (with flag overrides) names.
func openModel(mc agent.ModelConfig) (model.Model, error) {
	switch mc.Provider {
	case "openai-responses", "openai-chat":
		api := openai.APIResponses
		if mc.Provider == "openai-chat" {
			api = openai.APIChat
		}
		return openai.New(openai.Config{API: api, BaseURL: mc.BaseURL, APIKey: os.Getenv("OPENAI_API_KEY"), Model: mc.Name})
	case "scripted":
		if mc.Plan == "" {
			return nil, fmt.Errorf("the scripted model needs a plan (model.plan in the agent file, or --plan)")
		}
		return scripted.Load(mc.Plan)
	case "":
		return nil, fmt.Errorf("no model provider: set model.provider in the agent file or pass --provider (%s)", strings.Join(agent.Providers, "|"))
	}
	return nil, fmt.Errorf("unknown model provider %q (choose one of %s)", mc.Provider, strings.Join(agent.Providers, "|"))
}

// progressPrinter prints one line per step of a run, and the model's text
// as it streams:
//
//	turn 2  model  Let me run the reconciliation script.
//	turn 2  exec_command  python3 reconcile.py  exit 0  120ms
func progressPrinter(w io.Writer) func(agent.Event) {
	var mu sync.Mutex
	streaming := 0 // the turn whose text line is open, 0 for none
	return func(e agent.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Type == agent.EventTextDelta {
			if streaming != e.Turn {
				if streaming != 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprintf(w, "turn %d  model  ", e.Turn)
				streaming = e.Turn
			}
			// Newlines in the text keep the next lines indented under it.
			fmt.Fprint(w, strings.ReplaceAll(e.Text, "\n", "\n         "))
			return
		}
		if streaming != 0 {
			fmt.Fprintln(w)
			streaming = 0
		}
		switch e.Type {
		case agent.EventSession:
			fmt.Fprintf(w, "session  %s\n", e.Text)
		case agent.EventToolResult:
			line := fmt.Sprintf("turn %d  %s", e.Turn, e.Tool)
			if e.Summary != "" {
				line += "  " + e.Summary
			}
			switch {
			case e.Denied:
				fmt.Fprintf(w, "%s  not run (denied)\n", line)
				return
			case e.Interrupted:
				fmt.Fprintf(w, "%s  interrupted when the run stopped; not run again\n", line)
				return
			case e.Err != "":
				line += "  error: " + oneLine(e.Err, 100)
			case e.ExitCode != nil:
				line += fmt.Sprintf("  exit %d", *e.ExitCode)
				if e.TimedOut {
					line += " (timed out)"
				}
			default:
				line += "  ok"
			}
			fmt.Fprintf(w, "%s  %s\n", line, e.Duration.Round(time.Millisecond))
		case agent.EventApproval:
			verdict := "denied"
			if e.Approved {
				verdict = "approved"
			}
			if e.Approved {
				fmt.Fprintf(w, "turn %d  %s  %s  %s\n", e.Turn, e.Tool, e.Summary, verdict)
			}
		case agent.EventFinal:
			fmt.Fprintf(w, "turn %d  final answer\n", e.Turn)
		}
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

// terminalApprover asks on the terminal (y/N) for calls that need
// approval; with no terminal it denies them and says so, or, with wait,
// leaves them pending (agent.ErrApprovalPending) for a resumed run.
func terminalApprover(w io.Writer, wait bool) agent.Approver {
	var mu sync.Mutex
	return agent.ApproverFunc(func(ctx context.Context, c agent.Call) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil || !term.IsTerminal(int(tty.Fd())) {
			if tty != nil {
				tty.Close()
			}
			if wait {
				fmt.Fprintf(w, "approval needed for %s %q (rule %s), and there is no terminal to ask: the run stops with the call pending\n", c.Tool, oneLine(c.Subject, 120), c.Rule)
				return false, agent.ErrApprovalPending
			}
			fmt.Fprintf(w, "approval needed for %s %q (rule %s), but there is no terminal to ask: denied\n", c.Tool, oneLine(c.Subject, 120), c.Rule)
			return false, nil
		}
		defer tty.Close()
		fmt.Fprintf(tty, "approve %s %q (rule %s)? [y/N] ", c.Tool, oneLine(c.Subject, 200), c.Rule)
		answer := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(tty).ReadString('\n')
			answer <- strings.TrimSpace(strings.ToLower(line))
		}()
		select {
		case a := <-answer:
			return a == "y" || a == "yes", nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	})
}
