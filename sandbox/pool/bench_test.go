package pool_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/sandbox/pool"
)

// go test -run - -bench . -benchtime 50x ./sandbox/pool/ (as root):
// a session from the pool against one made on the spot (bench/README.md).

func benchClient(b *testing.B) *linux.Client {
	testenv.NeedRoot(b, "the linux backend")
	c, err := linux.New(linux.Options{StateDir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		testenv.Skipf(b, "linux backend unavailable: %v", err)
	}
	return c
}

func BenchmarkAcquireFromPool(b *testing.B) {
	c := benchClient(b)
	spec := sandbox.Spec{}
	p, err := pool.New(c, pool.Options{}, pool.Template{Spec: spec, Size: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	for b.Loop() {
		b.StopTimer()
		for p.Stats()[0].Ready == 0 {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		s, err := p.Create(context.Background(), spec)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Close(context.Background())
		b.StartTimer()
	}
	if st := p.Stats()[0]; st.Miss > 0 {
		b.Fatalf("%d Creates missed the pool", st.Miss)
	}
}

func BenchmarkCreateOnTheSpot(b *testing.B) {
	c := benchClient(b)
	for b.Loop() {
		s, err := c.Create(context.Background(), sandbox.Spec{})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Close(context.Background())
		b.StartTimer()
	}
}
