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
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// Parse reads a size such as "512M", "1.5GiB", "500KB", "100k" or "4096",
// case-insensitively. K, M, G, T and KiB, MiB, GiB, TiB are binary
// (K = 1024, as in docker --memory); KB, MB, GB, TB are decimal
// (KB = 1000); a bare number is bytes. Every size agentbox reads (flags,
// agent files, artifact rules) goes through here, so a unit means the
// same everywhere.
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

// Format prints n briefly in the largest binary unit: "512 B",
// "1.5 KiB", "3.0 MiB".
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
