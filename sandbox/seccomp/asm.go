//go:build linux

package seccomp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// program is a tiny classic-BPF assembler with named jump targets. Classic
// BPF jumps are forward-only with 8-bit offsets; resolving them by hand is
// where filters go wrong, so the builder does it and checks the range.
type program struct {
	ins    []instruction
	labels map[string]int
}

// instruction is one BPF instruction whose jumps may still be labels.
type instruction struct {
	code   uint16
	k      uint32
	jt, jf string // label names; "" means "fall through" (offset 0)
}

func newProgram() *program { return &program{labels: map[string]int{}} }

// label names the next instruction emitted.
func (p *program) label(name string) {
	if _, dup := p.labels[name]; dup {
		panic("seccomp: duplicate label " + name) // a bug in this package, not input
	}
	p.labels[name] = len(p.ins)
}

// load32 loads the 32-bit word at offset off of struct seccomp_data.
func (p *program) load32(off uint32) {
	p.ins = append(p.ins, instruction{code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, k: off})
}

// jump emits a conditional jump on the accumulator against k (op is one of
// BPF_JEQ, BPF_JGE, BPF_JGT, BPF_JSET).
func (p *program) jump(op uint16, k uint32, jt, jf string) {
	p.ins = append(p.ins, instruction{code: unix.BPF_JMP | op | unix.BPF_K, k: k, jt: jt, jf: jf})
}

// ret returns the seccomp action k.
func (p *program) ret(k uint32) {
	p.ins = append(p.ins, instruction{code: unix.BPF_RET | unix.BPF_K, k: k})
}

// assemble resolves labels into offsets.
func (p *program) assemble() ([]unix.SockFilter, error) {
	if len(p.ins) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program has %d instructions, over the kernel's %d", len(p.ins), unix.BPF_MAXINSNS)
	}
	out := make([]unix.SockFilter, len(p.ins))
	for i, in := range p.ins {
		jt, err := p.offset(i, in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := p.offset(i, in.jf)
		if err != nil {
			return nil, err
		}
		out[i] = unix.SockFilter{Code: in.code, Jt: jt, Jf: jf, K: in.k}
	}
	return out, nil
}

func (p *program) offset(from int, label string) (uint8, error) {
	if label == "" {
		return 0, nil
	}
	to, ok := p.labels[label]
	if !ok {
		return 0, fmt.Errorf("seccomp: instruction %d jumps to undefined label %q", from, label)
	}
	d := to - (from + 1)
	if d < 0 || d > 255 {
		return 0, fmt.Errorf("seccomp: instruction %d jumps %d to label %q, outside classic BPF's 0..255", from, d, label)
	}
	return uint8(d), nil
}
