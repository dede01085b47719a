package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// event is one line of `go test -json` (cmd/internal/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	Elapsed    float64
	ImportPath string // build-output and build-fail
}

// skip is a skipped test and the first line of its message.
type skip struct {
	pkg, test, reason string
}

// report follows the events of one go test run.
type report struct {
	out    io.Writer
	module string
	// output holds each running test's lines, by package and name; a
	// package's own lines are under the name "".
	output map[[2]string][]string
	passed int
	// failed names each failed test or package ("pkg TestX", "pkg").
	failed []string
	skips  []skip
	events int
}

func newReport(out io.Writer, module string) *report {
	return &report{out: out, module: module, output: map[[2]string][]string{}}
}

// rel is pkg relative to the module, "." for its root.
func (r *report) rel(pkg string) string {
	switch {
	case r.module == "":
		return pkg
	case pkg == r.module:
		return "."
	}
	return strings.TrimPrefix(pkg, r.module+"/")
}

// line takes one line of input: an event, or anything else (printed).
func (r *report) line(b []byte) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil || e.Action == "" {
		r.out.Write(b)
		return
	}
	r.events++
	pkg := r.rel(e.Package)
	k := [2]string{pkg, e.Test}
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
	case "output":
		r.output[k] = append(r.output[k], e.Output)
	case "pass":
		delete(r.output, k)
		if e.Test != "" {
			r.passed++
		} else {
			fmt.Fprintf(r.out, "ok    %s\t%.1fs\n", pkg, e.Elapsed)
		}
	case "fail":
		fmt.Fprint(r.out, strings.Join(r.output[k], ""))
		delete(r.output, k)
		name := pkg
		if e.Test != "" {
			name += " " + e.Test
		}
		r.failed = append(r.failed, name)
	case "skip":
		if e.Test != "" {
			r.skips = append(r.skips, skip{pkg: pkg, test: e.Test, reason: skipReason(r.output[k])})
		}
		delete(r.output, k)
	}
}

// logLine is the first line of a t.Log message: "    file.go:12: text".
var logLine = regexp.MustCompile(`^\s+[^\s:]+\.go:\d+: (.*)$`)

// skipReason is the first line of the last message a test logged before
// its skip: the skip's own.
func skipReason(lines []string) string {
	reason := "(no message)"
	for _, l := range lines {
		if m := logLine.FindStringSubmatch(strings.TrimRight(l, "\n")); m != nil {
			reason = m[1]
		}
	}
	return reason
}

// finish prints the summary and returns the exit code: exitFailed when a
// test failed, else exitSkipped when one was skipped without the
// allow-list's leave.
func (r *report) finish(allow []allowed) int {
	// Tests that started but never ended: the binary died under them.
	var unfinished [][2]string
	for k := range r.output {
		if k[1] != "" {
			unfinished = append(unfinished, k)
		}
	}
	slices.SortFunc(unfinished, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	for _, k := range unfinished {
		fmt.Fprint(r.out, strings.Join(r.output[k], ""))
		r.failed = append(r.failed, k[0]+" "+k[1]+" (never finished)")
	}
	// The allowed skips are grouped under the line that allows them.
	byLine := map[int][]string{}
	var bad []string
	nok := 0
	for _, sk := range r.skips {
		if a := find(allow, sk); a != nil {
			byLine[a.line] = append(byLine[a.line], fmt.Sprintf("    %s %s: %s", sk.pkg, sk.test, sk.reason))
			nok++
		} else {
			bad = append(bad, fmt.Sprintf("  %s | %s | %s", sk.pkg, sk.test, sk.reason))
		}
	}
	fmt.Fprintf(r.out, "\n== %d passed, %d failed, %d skipped (%d on the allow-list)\n", r.passed, len(r.failed), len(r.skips), nok)
	if nok > 0 {
		fmt.Fprintln(r.out, "skipped, allowed:")
		for _, a := range allow {
			if s := byLine[a.line]; len(s) > 0 {
				fmt.Fprintf(r.out, "  by line %d: %s\n%s\n", a.line, a.why, strings.Join(s, "\n"))
			}
		}
	}
	code := 0
	if len(bad) > 0 {
		fmt.Fprintf(r.out, "skipped, NOT allowed (a test CI does not run is a failure; make it run, or add the line with a why to the allow-list):\n%s\n", strings.Join(bad, "\n"))
		code = exitSkipped
	}
	if len(r.failed) > 0 {
		fmt.Fprintf(r.out, "failed:\n  %s\n", strings.Join(r.failed, "\n  "))
		code = exitFailed
	}
	if r.events == 0 {
		fmt.Fprintln(r.out, "no test events read: was go test run with -json?")
		code = exitFailed
	}
	return code
}
