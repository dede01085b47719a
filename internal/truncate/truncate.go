// Package truncate bounds text for a reader that must know something was
// cut: the head and the tail are kept and a marker in the middle says how
// many bytes went. Tool outputs the model reads and the fields of a run's
// trace are cut this one way.
package truncate

import "fmt"

// Middle keeps the head and tail of s within max bytes (max > 0) and puts
// "…[truncated N bytes]…" on a line of its own between them. It never
// splits a UTF-8 sequence; ok reports whether anything was cut.
func Middle(s string, max int) (out string, cut bool) {
	if len(s) <= max {
		return s, false
	}
	// The marker's own length depends on the cut; reserve room for it.
	const reserve = 40
	keep := max - reserve
	if keep < 2 {
		keep = 2
	}
	head := RuneStart(s, keep/2)
	tailStart := RuneStart(s, len(s)-(keep-head))
	n := tailStart - head
	return s[:head] + fmt.Sprintf("\n…[truncated %d bytes]…\n", n) + s[tailStart:], true
}

// RuneStart moves i back to the start of the UTF-8 sequence it falls in.
func RuneStart(s string, i int) int {
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
