package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// series is one contender's samples.
type series struct {
	name string
	d    []time.Duration
}

func (s *series) add(d time.Duration) { s.d = append(s.d, d) }

// pct is the nearest-rank percentile p (0 < p <= 1) of the samples; zero
// when there are none.
func (s *series) pct(p float64) time.Duration {
	if len(s.d) == 0 {
		return 0
	}
	d := slices.Clone(s.d)
	slices.Sort(d)
	i := int(math.Ceil(p*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func (s *series) p50() time.Duration { return s.pct(0.50) }
func (s *series) p95() time.Duration { return s.pct(0.95) }

// ms formats a duration in milliseconds with enough digits for
// sub-millisecond figures.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}

// ratio is a/b formatted as "1.23x", or "n/a" when b is zero.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

// mib formats bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
