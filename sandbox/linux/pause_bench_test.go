package linux

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// BenchmarkPauseUnpause is Pause, then Unpause, of a session whose
// process spins (a shell loop and 32 sleeping children, so the freeze
// has a tree to walk), each timed apart: Pause returns once the kernel
// says every process is frozen, Unpause once the group is thawed.
func BenchmarkPauseUnpause(b *testing.B) {
	c := newTestClient(b)
	s := newTestSession(b, c, sandbox.Spec{})
	p, err := s.Start(context.Background(), sandbox.ExecRequest{Cmd: []string{"sh", "-c", "for i in $(seq 32); do sleep 1000 & done; while :; do :; done"}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	time.Sleep(200 * time.Millisecond)
	var pause, unpause []time.Duration
	for b.Loop() {
		t := time.Now()
		if err := sandbox.Pause(context.Background(), s); err != nil {
			b.Fatal(err)
		}
		pause = append(pause, time.Since(t))
		t = time.Now()
		if err := sandbox.Unpause(context.Background(), s); err != nil {
			b.Fatal(err)
		}
		unpause = append(unpause, time.Since(t))
	}
	for _, m := range []struct {
		name string
		s    []time.Duration
	}{{"pause", pause}, {"unpause", unpause}} {
		slices.Sort(m.s)
		b.ReportMetric(float64(m.s[len(m.s)/2].Microseconds()), m.name+"-p50-µs")
		b.ReportMetric(float64(m.s[len(m.s)*95/100].Microseconds()), m.name+"-p95-µs")
	}
}
