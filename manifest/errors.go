package manifest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// Problem is one thing wrong with a manifest.
type Problem struct {
	// Where locates it: `entries["data/x"]`, `grants[0]`, `run_as`.
	Where string
	// Msg says what is wrong.
	Msg string
	// Kind is sandbox.ErrInvalid, sandbox.ErrPathEscape or
	// sandbox.ErrNotFound.
	Kind error
}

func (p Problem) String() string { return "manifest: " + p.Where + ": " + p.Msg }

// ValidationError lists every problem found in a manifest, one per line,
// so a user can fix them all at once. errors.Is matches each problem's
// kind (sandbox.ErrInvalid, sandbox.ErrPathEscape, sandbox.ErrNotFound).
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes the distinct kinds of the problems.
func (e *ValidationError) Unwrap() []error {
	var kinds []error
	for _, p := range e.Problems {
		if p.Kind != nil && !slices.Contains(kinds, p.Kind) {
			kinds = append(kinds, p.Kind)
		}
	}
	return kinds
}

// problems collects Problems as validation goes.
type problems struct{ list []Problem }

func (ps *problems) add(kind error, where, format string, args ...any) {
	ps.list = append(ps.list, Problem{Where: where, Msg: fmt.Sprintf(format, args...), Kind: kind})
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps.list}
}

// entryWhere is how problems name an entry.
func entryWhere(p string) string { return fmt.Sprintf("entries[%q]", p) }

var (
	errInvalid  = sandbox.ErrInvalid
	errEscape   = sandbox.ErrPathEscape
	errNotFound = sandbox.ErrNotFound
)
