package didyoumean

import "testing"

func TestNearest(t *testing.T) {
	keys := []string{"name", "instructions", "model", "policy", "timeout", "memory"}
	tests := []struct {
		name, in, want string
	}{
		{"a dropped letter is corrected", "instrucions", "instructions"},
		{"two swapped letters are corrected", "modle", "model"},
		{"a doubled letter is corrected", "timeoutt", "timeout"},
		{"an exact name is itself", "policy", "policy"},
		{"an unrelated word gets no suggestion", "browser", ""},
		{"a short word is not bent into another", "mo", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Nearest(tt.in, keys); got != tt.want {
				t.Fatalf("Nearest(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
