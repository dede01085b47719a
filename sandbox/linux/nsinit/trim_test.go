package nsinit

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestIdleTrim(t *testing.T) {
	tests := []struct {
		name  string
		quiet time.Duration
		busy  int // calls to busy before waiting
		wait  time.Duration
		want  int32
	}{
		{"a quiet init trims once", 10 * time.Millisecond, 0, 300 * time.Millisecond, 1},
		{"an init that keeps serving does not trim yet", time.Minute, 3, 10 * time.Millisecond, 0},
		{"the trim runs once after the requests stop", 10 * time.Millisecond, 3, 300 * time.Millisecond, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			it := newIdleTrim(tt.quiet, func() { n.Add(1) })
			defer it.t.Stop()
			for i := 0; i < tt.busy; i++ {
				it.busy()
			}
			time.Sleep(tt.wait)
			it.busy() // after a trim, busy neither re-arms it nor trims again
			time.Sleep(tt.wait)
			if got := n.Load(); got != tt.want {
				t.Errorf("trims = %d, want %d", got, tt.want)
			}
		})
	}
}
