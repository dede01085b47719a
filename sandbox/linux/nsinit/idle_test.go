package nsinit

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestIdleClock(t *testing.T) {
	t.Run("an idle session expires after its timeout", func(t *testing.T) {
		var expired atomic.Bool
		newIdleClock(50*time.Millisecond, func() { expired.Store(true) }, time.Now)
		time.Sleep(300 * time.Millisecond)
		if !expired.Load() {
			t.Fatal("not expired 300 ms into an idle timeout of 50 ms")
		}
	})
	t.Run("an open connection keeps it, and the idle period counts from its close", func(t *testing.T) {
		var expired atomic.Bool
		c := newIdleClock(100*time.Millisecond, func() { expired.Store(true) }, time.Now)
		c.busy()
		time.Sleep(300 * time.Millisecond)
		if expired.Load() {
			t.Fatal("expired while a connection was open")
		}
		c.done()
		time.Sleep(50 * time.Millisecond)
		if expired.Load() {
			t.Fatal("expired 50 ms after the last connection closed, with a timeout of 100 ms")
		}
		time.Sleep(300 * time.Millisecond)
		if !expired.Load() {
			t.Fatal("not expired 350 ms after the last connection closed")
		}
	})
	t.Run("a timer that fires late, the init frozen meanwhile, starts the idle period again", func(t *testing.T) {
		var expired atomic.Bool
		now := time.Now()
		var clock atomic.Int64
		clock.Store(now.UnixNano())
		c := newIdleClock(time.Hour, func() { expired.Store(true) }, func() time.Time { return time.Unix(0, clock.Load()) })
		c.t.Stop()
		clock.Add(int64(3 * time.Hour)) // paused for three hours, then thawed
		c.fire()
		if expired.Load() {
			t.Fatal("expired at the thaw of a session paused past its idle timeout")
		}
		clock.Add(int64(time.Hour + 500*time.Millisecond)) // the timer on time
		c.t.Stop()
		c.fire()
		if !expired.Load() {
			t.Fatal("not expired an idle hour after the thaw")
		}
	})
}
