package artifact

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"unicode/utf8"
)

// Content types by content. http.DetectContentType knows the binary
// signatures; it cannot tell JSON, CSV or Markdown from plain text, and
// calls anything decodable "text/plain", so text is judged here on the
// whole file (valid UTF-8, no NUL, no control characters but whitespace)
// and JSON and CSV by parsing.
const (
	TypeJSON       = "application/json"
	TypeCSV        = "text/csv"
	TypeMarkdown   = "text/markdown"
	TypePlain      = "text/plain"
	TypePNG        = "image/png"
	TypePDF        = "application/pdf"
	TypeExecutable = "application/x-executable"
	TypeBinary     = "application/octet-stream"
)

// sniffer watches the bytes of a file as they are copied: it keeps the
// head for signature detection and checks that the whole file is text.
type sniffer struct {
	head    []byte
	n       int64
	notText string // why the content is not text, "" while it is
	carry   []byte // an incomplete UTF-8 sequence at a chunk's end
}

func (s *sniffer) Write(p []byte) (int, error) {
	if len(s.head) < 512 {
		s.head = append(s.head, p[:min(len(p), 512-len(s.head))]...)
	}
	s.n += int64(len(p))
	if s.notText != "" {
		return len(p), nil
	}
	b := p
	if len(s.carry) > 0 {
		b = append(s.carry, p...)
		s.carry = nil
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c == 0 {
				s.notText = "it contains NUL bytes"
				return len(p), nil
			}
			if c < 0x20 && !strings.ContainsRune("\t\n\r\f\v", rune(c)) || c == 0x7f {
				s.notText = "it contains control characters"
				return len(p), nil
			}
			i++
			continue
		}
		if !utf8.FullRune(b[i:]) {
			s.carry = append([]byte(nil), b[i:]...)
			break
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			s.notText = "it is not valid UTF-8"
			return len(p), nil
		}
		i += size
	}
	return len(p), nil
}

// isText is the final verdict, once every byte was written.
func (s *sniffer) isText() bool {
	if len(s.carry) > 0 && s.notText == "" {
		s.notText = "it ends in a truncated UTF-8 sequence"
	}
	return s.notText == ""
}

// detection is what a file's content is.
type detection struct {
	// Type is the most specific type detected.
	Type string
	// Satisfies are all the types the content is valid as (a JSON file
	// is also plain text, and any text is valid Markdown).
	Satisfies []string
	// NotText says why the file is not text, for messages.
	NotText string
}

// detect classifies the staged copy at file whose bytes s watched.
func detect(s *sniffer, file string) detection {
	switch {
	case bytes.HasPrefix(s.head, []byte("\x89PNG\r\n\x1a\n")):
		return detection{Type: TypePNG, Satisfies: []string{TypePNG}, NotText: "it is a PNG image"}
	case bytes.HasPrefix(s.head, []byte("%PDF-")):
		return detection{Type: TypePDF, Satisfies: []string{TypePDF}, NotText: "it is a PDF document"}
	case bytes.HasPrefix(s.head, []byte("\x7fELF")):
		return detection{Type: TypeExecutable, Satisfies: []string{TypeExecutable}, NotText: "it is an ELF executable"}
	}
	if !s.isText() {
		t := baseType(http.DetectContentType(s.head))
		if strings.HasPrefix(t, "text/") {
			t = TypeBinary // the whole file says otherwise
		}
		return detection{Type: t, Satisfies: []string{t}, NotText: s.notText}
	}
	d := detection{Type: TypePlain, Satisfies: []string{TypePlain, TypeMarkdown}}
	if t := baseType(http.DetectContentType(s.head)); t != TypePlain && strings.HasPrefix(t, "text/") {
		d.Satisfies = append(d.Satisfies, t) // text/html, text/xml
	}
	if isCSV(file) {
		d.Type = TypeCSV
		d.Satisfies = append(d.Satisfies, TypeCSV)
	}
	if isJSON(file) {
		d.Type = TypeJSON
		d.Satisfies = append(d.Satisfies, TypeJSON)
	}
	return d
}

// baseType drops parameters: "text/plain; charset=utf-8" -> "text/plain".
func baseType(t string) string {
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		return mt
	}
	return strings.ToLower(strings.TrimSpace(strings.Split(t, ";")[0]))
}

// isJSON reports whether the file holds exactly one JSON value.
func isJSON(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return false
	}
	_, err = dec.Token()
	return errors.Is(err, io.EOF)
}

// isCSV reports whether the file parses as CSV with at least two columns
// and the same number of fields in every record.
func isCSV(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = true
	first, err := r.Read()
	if err != nil || len(first) < 2 {
		return false
	}
	for {
		if _, err := r.Read(); err != nil {
			return errors.Is(err, io.EOF)
		}
	}
}

// typeAllowed returns the first satisfied type that an allowed one
// ("type/subtype" or "type/*") matches, in the order allowed lists them;
// "" when none does.
func typeAllowed(allowed, satisfies []string) string {
	for _, a := range allowed {
		a = baseType(a)
		for _, s := range satisfies {
			if a == s || strings.HasSuffix(a, "/*") && strings.HasPrefix(s, strings.TrimSuffix(a, "*")) {
				return s
			}
		}
	}
	return ""
}
