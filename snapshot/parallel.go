package snapshot

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// forEach runs fn for every index in [0, n) on GOMAXPROCS goroutines, each
// with its own worker, and returns the first error (the others stop taking
// new indexes then).
func forEach(ctx context.Context, n int, fn func(w *worker, i int) error) error {
	workers := min(runtime.GOMAXPROCS(0), max(n, 1))
	var (
		next    atomic.Int64
		errOnce sync.Once
		first   error
		failed  atomic.Bool
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { first = err })
		failed.Store(true)
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWorker()
			defer w.close()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := ctx.Err(); err != nil {
					fail(err)
					return
				}
				if err := fn(w, i); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// progress reports bytes done to a caller's callback, from many
// goroutines, at most every 50ms plus once at the end; calls are
// serialized.
type progress struct {
	fn    func(done, total int64)
	total int64
	done  atomic.Int64
	mu    sync.Mutex
	last  time.Time
}

func newProgress(fn func(done, total int64), total int64) *progress {
	p := &progress{fn: fn, total: total}
	if fn != nil {
		fn(0, total)
	}
	return p
}

func (p *progress) add(n int64) {
	if p.fn == nil {
		return
	}
	d := p.done.Add(n)
	if !p.mu.TryLock() {
		return
	}
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= 50*time.Millisecond {
		p.last = now
		p.fn(d, p.total)
	}
}

func (p *progress) finish() {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn(p.done.Load(), p.total)
}
