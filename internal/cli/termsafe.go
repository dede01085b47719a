package cli

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// neutralizer passes a sandboxed command's output on to the caller's
// terminal with its control characters made visible: ESC and the other
// C0 controls but tab, newline, carriage return and backspace become ^X,
// and the C1 controls (CSI, OSC, DCS ... as U+0080-U+009F) \u009b. Threat:
// a command that did not ask for a terminal writes escape sequences that
// the caller's terminal obeys: OSC 52 sets the clipboard, a title
// sequence or a CSI query answers into the terminal's input, and others
// rewrite what is on screen. A command run with --tty owns its terminal
// and is passed through; --raw passes everything.
type neutralizer struct {
	w io.Writer
	// held is a last byte 0xc2, the first of a C1 control's two, kept
	// until the next write says what it begins.
	held bool
}

func (n *neutralizer) Write(p []byte) (int, error) {
	size := len(p)
	if n.held {
		p = append([]byte{0xc2}, p...)
		n.held = false
	}
	if len(p) > 0 && p[len(p)-1] == 0xc2 {
		n.held = true
		p = p[:len(p)-1]
	}
	if !needsNeutralizing(p) {
		if _, err := n.w.Write(p); err != nil {
			return 0, err
		}
		return size, nil
	}
	var b bytes.Buffer
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\t' || c == '\n' || c == '\r' || c == '\b':
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			b.WriteByte('^')
			b.WriteByte(c ^ 0x40)
		case c == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] <= 0x9f:
			// U+0080-U+009F in UTF-8: the C1 controls.
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[p[i+1]>>4])
			b.WriteByte("0123456789abcdef"[p[i+1]&0xf])
			i++
		default:
			b.WriteByte(c)
		}
	}
	if _, err := n.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return size, nil
}

// needsNeutralizing reports whether p holds a control character to hide.
func needsNeutralizing(p []byte) bool {
	for i, c := range p {
		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\b') || c == 0x7f ||
			(c == 0xc2 && i+1 < len(p) && p[i+1] >= 0x80 && p[i+1] <= 0x9f) {
			return true
		}
	}
	return false
}

// toTerminal is w, neutralized when it is a terminal (see neutralizer).
func toTerminal(w io.Writer, raw bool) io.Writer {
	if f, ok := w.(*os.File); ok && !raw && term.IsTerminal(int(f.Fd())) {
		return &neutralizer{w: w}
	}
	return w
}
