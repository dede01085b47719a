package agent

import "fmt"

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
	if len(s) <= max {
		return s, false
	}
	// The marker's own length depends on the cut; reserve room for it.
	const reserve = 40
	keep := max - reserve
	if keep < 2 {
		keep = 2
	}
	head := runeStart(s, keep/2)
	tailStart := runeStart(s, len(s)-(keep-head))
	cut := tailStart - head
	return s[:head] + fmt.Sprintf("\n…[truncated %d bytes]…\n", cut) + s[tailStart:], true
}

// runeStart moves i back to the start of the UTF-8 sequence it falls in.
func runeStart(s string, i int) int {
	if i <= 0 {
		return 0
	}
	if i >= len(s) {
		return len(s)
	}
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return i
}
