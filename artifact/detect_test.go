package artifact

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDetectJudgesContentNotNames(t *testing.T) {
	tests := []struct {
		name     string
		content  string
		want     string
		satisfy  []string
		chunkLen int // feed the sniffer in chunks this long (0: at once)
	}{
		{name: "a JSON object", content: `{"a": [1, 2]}` + "\n", want: TypeJSON, satisfy: []string{TypePlain, TypeMarkdown}},
		{name: "two JSON values are not one JSON document", content: `{"a":1} {"b":2}`, want: TypePlain},
		{name: "CSV with a consistent column count", content: "a,b\n1,2\n", want: TypeCSV, satisfy: []string{TypePlain}},
		{name: "ragged CSV is only text", content: "a,b\n1,2,3\n", want: TypePlain},
		{name: "Markdown is text", content: "# Title\n\n* item — ünïcode\n", want: TypePlain, satisfy: []string{TypeMarkdown}},
		{name: "UTF-8 split across writes is still text", content: "ééééé€€€", want: TypePlain, chunkLen: 1},
		{name: "invalid UTF-8 is binary", content: "abc\xff\xfe", want: TypeBinary},
		{name: "control characters are binary", content: "abc\x1b[31mred", want: TypeBinary},
		{name: "a PNG signature", content: "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", want: TypePNG},
		{name: "a PDF signature", content: "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", want: TypePDF},
		{name: "an ELF header", content: "\x7fELF\x02\x01\x01", want: TypeExecutable},
		{name: "a gzip stream", content: "\x1f\x8b\x08\x00\x00\x00\x00\x00", want: "application/x-gzip"},
		{name: "HTML is text, and text/html", content: "<!DOCTYPE html><html><body>x</body></html>", want: TypePlain, satisfy: []string{"text/html"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "f.md")
			must(t, os.WriteFile(file, []byte(tt.content), 0o644))
			s := &sniffer{}
			if tt.chunkLen > 0 {
				for b := []byte(tt.content); len(b) > 0; b = b[min(tt.chunkLen, len(b)):] {
					s.Write(b[:min(tt.chunkLen, len(b))])
				}
			} else {
				s.Write([]byte(tt.content))
			}
			d := detect(s, file)
			if d.Type != tt.want {
				t.Errorf("type = %s (%s), want %s", d.Type, d.NotText, tt.want)
			}
			for _, w := range tt.satisfy {
				if !slices.Contains(d.Satisfies, w) {
					t.Errorf("satisfies %v, want it to include %s", d.Satisfies, w)
				}
			}
		})
	}
}

func TestTypeAllowedTakesWildcards(t *testing.T) {
	if got := typeAllowed([]string{"image/*"}, []string{TypePNG}); got != TypePNG {
		t.Errorf("image/* vs png = %q", got)
	}
	if got := typeAllowed([]string{"text/*"}, []string{TypeBinary}); got != "" {
		t.Errorf("text/* accepted %q", got)
	}
	if got := typeAllowed([]string{"Text/Markdown"}, []string{TypePlain, TypeMarkdown}); !strings.EqualFold(got, TypeMarkdown) {
		t.Errorf("case-insensitive match = %q", got)
	}
}
