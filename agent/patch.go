package agent

import (
	"fmt"
	"strings"
)

// The V4A patch format, as OpenAI models write it for apply_patch:
//
//	*** Begin Patch
//	*** Add File: path        followed by "+" lines
//	*** Update File: path     optionally "*** Move to: new", then hunks:
//	@@ optional anchor line   then " " context, "-" removed, "+" added lines,
//	*** End of File           optionally, pinning the hunk to the file's end
//	*** Delete File: path
//	*** End Patch
const (
	patchBegin  = "*** Begin Patch"
	patchEnd    = "*** End Patch"
	patchAdd    = "*** Add File: "
	patchUpdate = "*** Update File: "
	patchDelete = "*** Delete File: "
	patchMove   = "*** Move to: "
	patchEOF    = "*** End of File"
)

// PatchOpKind says what a patch operation does to its file.
type PatchOpKind string

// The patch operations.
const (
	PatchAdd    PatchOpKind = "add"
	PatchUpdate PatchOpKind = "update"
	PatchDelete PatchOpKind = "delete"
)

// PatchOp is one file's part of a patch.
type PatchOp struct {
	Kind PatchOpKind
	Path string
	// MoveTo renames the file after an update.
	MoveTo string
	// Content is the whole file for PatchAdd.
	Content string
	Hunks   []Hunk
}

// Hunk is one change in an updated file.
type Hunk struct {
	// Anchors are the "@@ text" lines before the hunk: each is found in
	// order from the current position, and the hunk matches after them.
	Anchors []string
	// Lines are the hunk's lines, each starting with ' ', '-' or '+'.
	Lines []string
	// AtEOF pins the hunk to the end of the file.
	AtEOF bool
	// line is where the hunk starts in the patch, for errors.
	line int
}

// ParsePatch parses a V4A patch. Errors name the patch line.
func ParsePatch(text string) ([]PatchOp, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i >= len(lines) || strings.TrimSpace(lines[i]) != patchBegin {
		return nil, fmt.Errorf("patch line %d: the patch must start with %q", i+1, patchBegin)
	}
	if strings.TrimSpace(lines[len(lines)-1]) != patchEnd {
		return nil, fmt.Errorf("patch line %d: the patch must end with %q", len(lines), patchEnd)
	}
	lines = lines[:len(lines)-1]
	i++
	var ops []PatchOp
	for i < len(lines) {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, patchAdd):
			op := PatchOp{Kind: PatchAdd, Path: strings.TrimSpace(l[len(patchAdd):])}
			i++
			var b strings.Builder
			for i < len(lines) && !isFileHeader(lines[i]) {
				if !strings.HasPrefix(lines[i], "+") {
					return nil, fmt.Errorf("patch line %d: every line of an added file must start with '+', got %q", i+1, clipText(lines[i], 60))
				}
				b.WriteString(lines[i][1:])
				b.WriteByte('\n')
				i++
			}
			op.Content = b.String()
			ops = append(ops, op)
		case strings.HasPrefix(l, patchDelete):
			ops = append(ops, PatchOp{Kind: PatchDelete, Path: strings.TrimSpace(l[len(patchDelete):])})
			i++
		case strings.HasPrefix(l, patchUpdate):
			op := PatchOp{Kind: PatchUpdate, Path: strings.TrimSpace(l[len(patchUpdate):])}
			i++
			if i < len(lines) && strings.HasPrefix(lines[i], patchMove) {
				op.MoveTo = strings.TrimSpace(lines[i][len(patchMove):])
				i++
			}
			var err error
			op.Hunks, i, err = parseHunks(lines, i)
			if err != nil {
				return nil, err
			}
			if len(op.Hunks) == 0 && op.MoveTo == "" {
				return nil, fmt.Errorf("patch line %d: update of %s has no hunk", i, op.Path)
			}
			ops = append(ops, op)
		case strings.TrimSpace(l) == "":
			i++
		default:
			return nil, fmt.Errorf("patch line %d: expected a file header (%q, %q or %q), got %q", i+1, strings.TrimSpace(patchAdd), strings.TrimSpace(patchUpdate), strings.TrimSpace(patchDelete), clipText(l, 60))
		}
	}
	for _, op := range ops {
		if op.Path == "" {
			return nil, fmt.Errorf("patch: a %s operation has no path", op.Kind)
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("patch: no file operation between %q and %q", patchBegin, patchEnd)
	}
	return ops, nil
}

func isFileHeader(l string) bool {
	return strings.HasPrefix(l, patchAdd) || strings.HasPrefix(l, patchUpdate) || strings.HasPrefix(l, patchDelete)
}

// parseHunks reads an update's hunks from lines[i:] up to the next file
// header.
func parseHunks(lines []string, i int) ([]Hunk, int, error) {
	var hunks []Hunk
	var cur *Hunk
	for i < len(lines) && !isFileHeader(lines[i]) {
		l := lines[i]
		switch {
		case l == "@@" || strings.HasPrefix(l, "@@ "):
			if cur == nil || len(cur.Lines) > 0 {
				hunks = append(hunks, Hunk{line: i + 1})
				cur = &hunks[len(hunks)-1]
			}
			if a := strings.TrimSpace(strings.TrimPrefix(l, "@@")); a != "" {
				cur.Anchors = append(cur.Anchors, a)
			}
		case strings.TrimSpace(l) == patchEOF:
			if cur == nil || len(cur.Lines) == 0 {
				return nil, i, fmt.Errorf("patch line %d: %q must follow a hunk's lines", i+1, patchEOF)
			}
			cur.AtEOF = true
			cur = nil
		default:
			if cur == nil {
				hunks = append(hunks, Hunk{line: i + 1})
				cur = &hunks[len(hunks)-1]
			}
			switch {
			case l == "":
				// An empty context line whose leading space was lost.
				cur.Lines = append(cur.Lines, " ")
			case l[0] == ' ' || l[0] == '-' || l[0] == '+':
				cur.Lines = append(cur.Lines, l)
			default:
				return nil, i, fmt.Errorf("patch line %d: a hunk line must start with ' ', '-' or '+', got %q", i+1, clipText(l, 60))
			}
		}
		i++
	}
	for _, h := range hunks {
		if len(h.Lines) == 0 {
			return nil, i, fmt.Errorf("patch line %d: hunk has no lines", h.line)
		}
	}
	return hunks, i, nil
}

// ApplyHunks applies an update's hunks to content. The file's line
// endings (LF or CRLF) and its final newline are kept. A hunk whose
// context cannot be found fails the whole update, naming the hunk.
func ApplyHunks(path, content string, hunks []Hunk) (string, error) {
	crlf := strings.Contains(content, "\r\n")
	if crlf {
		content = strings.ReplaceAll(content, "\r\n", "\n")
	}
	finalNL := strings.HasSuffix(content, "\n")
	lines := strings.Split(content, "\n")
	if finalNL || content == "" {
		lines = lines[:len(lines)-1]
	}
	cursor := 0
	for n, h := range hunks {
		for _, a := range h.Anchors {
			idx := findLine(lines, cursor, a)
			if idx < 0 {
				return "", fmt.Errorf("%s: hunk %d (patch line %d): anchor %q not found", path, n+1, h.line, a)
			}
			cursor = idx + 1
		}
		var old []string
		for _, l := range h.Lines {
			if l[0] != '+' {
				old = append(old, strings.TrimSuffix(l[1:], "\r"))
			}
		}
		var at int
		switch {
		case len(old) == 0 && (h.AtEOF || len(h.Anchors) == 0):
			at = len(lines)
		case len(old) == 0:
			at = cursor
		default:
			at = seekLines(lines, old, cursor, h.AtEOF)
			if at < 0 {
				return "", fmt.Errorf("%s: hunk %d (patch line %d): context not found; the file has no lines matching:\n%s", path, n+1, h.line, clipText(strings.Join(old, "\n"), 400))
			}
		}
		// Context lines keep the file's own text (its whitespace), not
		// the patch's approximation of it.
		var repl []string
		j := at
		for _, l := range h.Lines {
			switch l[0] {
			case ' ':
				repl = append(repl, lines[j])
				j++
			case '-':
				j++
			case '+':
				repl = append(repl, strings.TrimSuffix(l[1:], "\r"))
			}
		}
		lines = append(lines[:at], append(repl, lines[at+len(old):]...)...)
		cursor = at + len(repl)
	}
	// The final newline is kept as it was (a new file gets one), except
	// that a last line that is empty needs its newline to exist at all:
	// "a" plus an empty line is "a\n\n", not "a\n" (which is just "a").
	out := strings.Join(lines, "\n")
	if len(lines) > 0 && (finalNL || content == "" || lines[len(lines)-1] == "") {
		out += "\n"
	}
	if crlf {
		out = strings.ReplaceAll(out, "\n", "\r\n")
	}
	return out, nil
}

// findLine finds the first line at or after from equal to want, exactly
// or when both are trimmed.
func findLine(lines []string, from int, want string) int {
	for _, eq := range lineMatchers {
		for i := from; i < len(lines); i++ {
			if eq(lines[i], want) {
				return i
			}
		}
	}
	return -1
}

// lineMatchers compare lines ever more leniently: exactly, ignoring
// trailing whitespace, ignoring surrounding whitespace.
var lineMatchers = []func(a, b string) bool{
	func(a, b string) bool { return a == b },
	func(a, b string) bool { return strings.TrimRight(a, " \t") == strings.TrimRight(b, " \t") },
	func(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) },
}

// seekLines finds old in lines at or after from (at the very end when
// atEOF), trying each matcher in turn; -1 when absent.
func seekLines(lines, old []string, from int, atEOF bool) int {
	if len(old) > len(lines) {
		return -1
	}
	for _, eq := range lineMatchers {
		matchAt := func(i int) bool {
			for j := range old {
				if !eq(lines[i+j], old[j]) {
					return false
				}
			}
			return true
		}
		if atEOF {
			if i := len(lines) - len(old); i >= from && matchAt(i) {
				return i
			}
		}
		for i := from; i+len(old) <= len(lines); i++ {
			if matchAt(i) {
				return i
			}
		}
	}
	return -1
}
