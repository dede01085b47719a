package cli

import (
	"bytes"
	"testing"
)

func TestEscapeSequencesReachTheTerminalAsText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text and line ends pass", "ok\tx\r\ny\n", "ok\tx\r\ny\n"},
		{"an OSC 52 clipboard write is shown, not obeyed", "\x1b]52;c;ZXZpbA==\x07", "^[]52;c;ZXZpbA==^G"},
		{"a title sequence is shown", "\x1b]0;pwned\x1b\\", "^[]0;pwned^[\\"},
		{"a C1 CSI in UTF-8 is shown", "a\u009b31mb", `a\u009b31mb`},
		{"DEL is shown", "\x7f", "^?"},
		{"UTF-8 text passes", "héllo ✓", "héllo ✓"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			n, err := (&neutralizer{w: &b}).Write([]byte(tt.in))
			if err != nil || n != len(tt.in) || b.String() != tt.want {
				t.Fatalf("Write(%q) = %d, %v, wrote %q; want %q", tt.in, n, err, b.String(), tt.want)
			}
		})
	}
}

func TestAC1ControlSplitAcrossWritesIsStillShown(t *testing.T) {
	var b bytes.Buffer
	n := &neutralizer{w: &b}
	for _, part := range []string{"x\xc2", "\x9b2J", "\xc2"} {
		if _, err := n.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.String(); got != `x\u009b2J` {
		t.Fatalf("wrote %q", got)
	}
}
