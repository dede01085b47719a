package truncate

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMiddle(t *testing.T) {
	for _, tt := range []struct {
		name    string
		in      string
		max     int
		wantCut bool
	}{
		{"text within the bound is kept whole", "short", 10, false},
		{"long text keeps its head and tail around a marker", strings.Repeat("a", 500) + "END", 100, true},
		{"a cut never splits a multi-byte character", strings.Repeat("é€", 200), 101, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := Middle(tt.in, tt.max)
			if cut != tt.wantCut {
				t.Fatalf("cut = %v, want %v", cut, tt.wantCut)
			}
			if !cut {
				if got != tt.in {
					t.Errorf("Middle changed text within its bound: %q", got)
				}
				return
			}
			if len(got) > tt.max || !strings.Contains(got, "…[truncated ") || !utf8.ValidString(got) {
				t.Errorf("Middle(%d bytes, %d) = %d bytes %q", len(tt.in), tt.max, len(got), got)
			}
			if tt.in[len(tt.in)-3:] == "END" && !strings.HasSuffix(got, "END") {
				t.Errorf("the tail was lost: %q", got)
			}
		})
	}
}
