// Package bytesize parses and prints human byte sizes ("512M", "1.5GiB").
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var units = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"tb", 1 << 40},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// Parse reads a size such as "512M", "1.5GiB", "100k" or "4096". Suffixes
// are binary (K = 1024) and case-insensitive; a bare number is bytes.
func Parse(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("size %q: empty", s)
	}
	mult := 1.0
	for _, u := range units {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("size %q: not a number with an optional unit (K, M, G, T; e.g. 512M)", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("size %q: negative", s)
	}
	v := n * mult
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(v), nil
}

// Format prints n with the largest binary unit that keeps it readable.
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + string("KMGT"[exp]) + "iB"
}
