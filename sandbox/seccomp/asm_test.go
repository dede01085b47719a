//go:build linux

package seccomp

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAssemblerRefusesBadJumps(t *testing.T) {
	tests := []struct {
		name  string
		build func(p *program)
		want  string
	}{
		{"a jump to an undefined label is refused", func(p *program) {
			p.jump(unix.BPF_JEQ, 1, "nowhere", "")
			p.ret(0)
		}, "undefined label"},
		{"a jump further than 255 instructions is refused", func(p *program) {
			p.jump(unix.BPF_JEQ, 1, "far", "")
			for range 256 {
				p.ret(0)
			}
			p.label("far")
			p.ret(0)
		}, "outside classic BPF"},
		{"a backward jump is refused", func(p *program) {
			p.label("back")
			p.ret(0)
			p.jump(unix.BPF_JEQ, 1, "back", "")
		}, "outside classic BPF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProgram()
			tt.build(p)
			if _, err := p.assemble(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("assemble error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestAssemblerResolvesLabelsToRelativeOffsets(t *testing.T) {
	p := newProgram()
	p.jump(unix.BPF_JEQ, 7, "yes", "no") // 0
	p.ret(1)                             // 1
	p.label("yes")
	p.ret(2) // 2
	p.label("no")
	p.ret(3) // 3
	prog, err := p.assemble()
	if err != nil {
		t.Fatal(err)
	}
	if prog[0].Jt != 1 || prog[0].Jf != 2 {
		t.Errorf("offsets = (%d, %d), want (1, 2)", prog[0].Jt, prog[0].Jf)
	}
}
