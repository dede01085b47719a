package agent

import "github.com/agentbox/agentbox/internal/truncate"

// DefaultToolOutputBytes caps a tool's output when the tool sets no cap.
const DefaultToolOutputBytes = 16 << 10

// Truncate keeps the head and tail of s within max bytes and puts an
// explicit marker in the middle saying how many bytes were cut. It never
// splits a UTF-8 sequence. max == 0 means DefaultToolOutputBytes; max < 0
// means the caller already bounded s.
func Truncate(s string, max int) (string, bool) {
	if max < 0 {
		return s, false
	}
	if max == 0 {
		max = DefaultToolOutputBytes
	}
	return truncate.Middle(s, max)
}
