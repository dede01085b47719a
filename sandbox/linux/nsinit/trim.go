package nsinit

import (
	"runtime/debug"
	"sync"
	"time"
)

// trimQuiet is how long the init's control socket must stay quiet before
// the init returns its set-up heap to the OS.
const trimQuiet = 100 * time.Millisecond

// idleTrim returns the init's set-up garbage (and the heap of the
// binary's package initialisers) to the OS once, when the session first
// goes quiet, so that an idle session costs the host little. It is not
// done at once when the init is ready: debug.FreeOSMemory takes ~7 ms
// of the init's CPU (a full GC and a scavenge), and a client's first
// command, which usually follows Create at once, would wait for it.
type idleTrim struct {
	mu    sync.Mutex
	t     *time.Timer
	done  bool
	trim  func()
	quiet time.Duration
}

// newIdleTrim arms the trim: it runs once quiet has passed without a
// call to busy.
func newIdleTrim(quiet time.Duration, trim func()) *idleTrim {
	it := &idleTrim{trim: trim, quiet: quiet}
	it.t = time.AfterFunc(quiet, it.fire)
	return it
}

func startIdleTrim() *idleTrim { return newIdleTrim(trimQuiet, debug.FreeOSMemory) }

// busy says the init is serving a request: the trim waits for the next
// quiet period.
func (it *idleTrim) busy() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.done {
		it.t.Reset(it.quiet)
	}
}

func (it *idleTrim) fire() {
	it.mu.Lock()
	if it.done {
		it.mu.Unlock()
		return
	}
	it.done = true
	it.mu.Unlock()
	it.trim()
}
