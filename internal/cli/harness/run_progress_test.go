package harness

import (
	"bytes"
	"testing"

	"github.com/agentbox/agentbox/agent"
)

func TestProgressShowsTheModelsTextAsItStreams(t *testing.T) {
	var out bytes.Buffer
	p := progressPrinter(&out)
	for _, e := range []agent.Event{
		{Type: agent.EventTextDelta, Turn: 1, Text: "Let me "},
		{Type: agent.EventTextDelta, Turn: 1, Text: "look.\nThen count."},
		{Type: agent.EventToolResult, Turn: 1, Tool: "exec_command", Summary: "ls"},
		{Type: agent.EventTextDelta, Turn: 2, Text: "Done."},
		{Type: agent.EventFinal, Turn: 2},
	} {
		p(e)
	}
	want := "turn 1  model  Let me look.\n         Then count.\nturn 1  exec_command  ls  ok  0s\nturn 2  model  Done.\nturn 2  final answer\n"
	if out.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", out.String(), want)
	}
}
