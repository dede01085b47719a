package main

import (
	"testing"
	"time"
)

func TestPercentiles(t *testing.T) {
	ten := series{}
	for i := 10; i >= 1; i-- {
		ten.add(time.Duration(i) * time.Millisecond)
	}
	tests := []struct {
		name string
		s    series
		p    float64
		want time.Duration
	}{
		{"the median of ten samples is the fifth smallest", ten, 0.50, 5 * time.Millisecond},
		{"the 95th percentile of ten samples is the largest", ten, 0.95, 10 * time.Millisecond},
		{"any percentile of one sample is that sample", series{d: []time.Duration{7}}, 0.95, 7},
		{"a percentile of no samples is zero", series{}, 0.50, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.pct(tt.p); got != tt.want {
				t.Errorf("pct(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestPercentileLeavesSamplesUnsorted(t *testing.T) {
	s := series{d: []time.Duration{3, 1, 2}}
	_ = s.p50()
	if s.d[0] != 3 || s.d[1] != 1 || s.d[2] != 2 {
		t.Errorf("pct reordered the samples: %v", s.d)
	}
}

func TestFormatting(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"sub-10 ms durations keep two decimals", ms(1234 * time.Microsecond), "1.23 ms"},
		{"longer durations keep one decimal", ms(265400 * time.Microsecond), "265.4 ms"},
		{"a ratio has two decimals", ratio(3*time.Second, 2*time.Second), "1.50x"},
		{"a ratio over zero is not a number", ratio(time.Second, 0), "n/a"},
		{"bytes are shown in MiB", mib(3 << 19), "1.50 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
