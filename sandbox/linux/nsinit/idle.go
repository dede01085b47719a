package nsinit

import (
	"sync"
	"time"
)

// idleClock ends an idle session (Resources.IdleTimeout). The session is
// busy while a control connection is open (a command holds its own open
// until it ends and is reported) and idle from the moment the last one
// closes; idle for timeout, the clock calls expire.
//
// A paused session's init is frozen, its timers with it: when a timer
// fires much later than it was set for, the init was frozen meanwhile
// (or the host stalled), and the idle period starts again rather than
// ending a session its owner has just unpaused.
type idleClock struct {
	mu      sync.Mutex
	timeout time.Duration
	open    int       // control connections open now
	since   time.Time // when the last one closed (or the clock started)
	armedAt time.Time // when the timer was last set
	due     time.Duration
	t       *time.Timer
	expire  func()
	now     func() time.Time
}

// frozenSlack is how much later than set a timer may fire before the
// clock takes the init to have been frozen.
const frozenSlack = time.Second

// startIdleClock starts the clock at now, the session being idle.
func startIdleClock(timeout time.Duration, expire func()) *idleClock {
	return newIdleClock(timeout, expire, time.Now)
}

func newIdleClock(timeout time.Duration, expire func(), now func() time.Time) *idleClock {
	c := &idleClock{timeout: timeout, expire: expire, now: now}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.since = now()
	c.arm(timeout)
	return c
}

// arm sets the timer to fire in d; c.mu must be held.
func (c *idleClock) arm(d time.Duration) {
	c.armedAt, c.due = c.now(), d
	if c.t == nil {
		c.t = time.AfterFunc(d, c.fire)
		return
	}
	c.t.Reset(d)
}

// busy notes a control connection opened.
func (c *idleClock) busy() {
	c.mu.Lock()
	c.open++
	c.mu.Unlock()
}

// done notes a control connection closed.
func (c *idleClock) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open--
	if c.open == 0 {
		c.since = c.now()
		c.arm(c.timeout)
	}
}

func (c *idleClock) fire() {
	c.mu.Lock()
	now := c.now()
	if now.Sub(c.armedAt) > c.due+frozenSlack {
		c.since = now // frozen meanwhile: idle from the thaw on
	}
	if c.open > 0 {
		c.mu.Unlock()
		return // done re-arms it
	}
	if left := c.timeout - now.Sub(c.since); left > 0 {
		c.arm(left)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.expire()
}
