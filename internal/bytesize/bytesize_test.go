package bytesize

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "4096", want: 4096},
		{in: "512M", want: 512 << 20},
		{in: "512m", want: 512 << 20},
		{in: "1G", want: 1 << 30},
		{in: "1.5GiB", want: 3 << 29},
		{in: "100k", want: 100 << 10},
		{in: "10MB", want: 10_000_000},
		{in: "500KB", want: 500_000},
		{in: "1.5 KiB", want: 1536},
		{in: " 2 g ", want: 2 << 30},
		{in: "0", want: 0},
		{in: "", bad: true},
		{in: "M", bad: true},
		{in: "12X", bad: true},
		{in: "-1M", bad: true},
		{in: "NaN", bad: true},
		{in: "1e30T", bad: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("Parse(%q) = %d, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatPrintsTheLargestBinaryUnit(t *testing.T) {
	for in, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 512 << 20: "512.0 MiB", 3 << 29: "1.5 GiB",
	} {
		if got := Format(in); got != want {
			t.Errorf("Format(%d) = %q, want %q", in, got, want)
		}
	}
}
