package agent

import (
	"fmt"

	"github.com/agentbox/agentbox/agent/model"
	"github.com/agentbox/agentbox/sandbox"
)

// Compaction is the capability that keeps a long conversation within a
// budget: when the tool outputs sent to the model exceed MaxBytes, the
// oldest ones (all but the latest KeepLast) are replaced with a short
// "[compacted: N bytes of output from TOOL]" marker. The Result keeps the
// full conversation; only what the model is sent is compacted.
type Compaction struct {
	// MaxBytes is the budget of tool output bytes (default 96 KiB, about
	// 24k tokens). MaxTokens, when set, overrides it at 4 bytes a token.
	MaxBytes  int
	MaxTokens int
	// KeepLast tool outputs are never compacted (default 4).
	KeepLast int
}

// Name implements Capability.
func (c *Compaction) Name() string { return "compaction" }

// Instructions implements Capability.
func (c *Compaction) Instructions() string {
	return "# Context\nTo keep the conversation short, older tool outputs may be replaced by \"[compacted: ...]\" markers. Run the command again (narrowed) if you need such output."
}

// Tools implements Capability: compaction adds none.
func (c *Compaction) Tools(sandbox.Session) []Tool { return nil }

func (c *Compaction) budget() int {
	switch {
	case c.MaxTokens > 0:
		return c.MaxTokens * 4
	case c.MaxBytes > 0:
		return c.MaxBytes
	}
	return 96 << 10
}

// FilterInput implements InputFilter. It returns a new slice when it
// compacts anything; items is not modified.
func (c *Compaction) FilterInput(items []model.Item) []model.Item {
	keep := c.KeepLast
	if keep <= 0 {
		keep = 4
	}
	total := 0
	var outputs []int
	names := map[string]string{}
	for i, it := range items {
		switch it.Type {
		case model.ItemFunctionCall:
			names[it.CallID] = it.Name
		case model.ItemFunctionCallOutput:
			total += len(it.Output)
			outputs = append(outputs, i)
		}
	}
	budget := c.budget()
	if total <= budget || len(outputs) <= keep {
		return items
	}
	out := append([]model.Item(nil), items...)
	for _, i := range outputs[:len(outputs)-keep] {
		if total <= budget {
			break
		}
		it := out[i]
		name := names[it.CallID]
		if name == "" {
			name = "a tool"
		}
		marker := fmt.Sprintf("[compacted: %d bytes of output from %s]", len(it.Output), name)
		if len(marker) >= len(it.Output) {
			continue
		}
		total -= len(it.Output) - len(marker)
		it.Output = marker
		out[i] = it
	}
	return out
}
