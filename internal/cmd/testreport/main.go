// Command testreport reads `go test -json` on its standard input and makes
// CI's log readable and its skips visible. It prints each package's
// result, the whole output of every failed test and, at the end, every
// skipped test with its reason; it keeps the raw events in a file; and it
// exits non-zero when a test failed or was skipped for a reason that the
// allow-list does not name (scripts/skips.allow: in CI, a test that does
// not run is a failure unless someone wrote down why it may not). With
// -fail-skips=false, for a run outside CI, such skips are listed only.
//
//	go test -json ./... | testreport -allow scripts/skips.allow -events out/test/all.json
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	allowPath := flag.String("allow", "scripts/skips.allow", "the allow-list of skips")
	eventsPath := flag.String("events", "", "write the raw events here (created with its directory)")
	failSkips := flag.Bool("fail-skips", true, "exit non-zero on a skip the allow-list does not name")
	flag.Parse()
	code := run(os.Stdin, os.Stdout, *allowPath, *eventsPath, modulePath("go.mod"))
	if code == exitSkipped && !*failSkips {
		fmt.Println("(not a failure outside CI: -fail-skips=false)")
		code = 0
	}
	os.Exit(code)
}

// The exit codes of run.
const (
	exitFailed  = 1 // a test or a build failed, or no test ran
	exitUsage   = 2 // the allow-list or the events file could not be used
	exitSkipped = 3 // only skips the allow-list does not name
)

// run reports the events read from in on out, naming packages relative
// to module; it returns the exit code.
func run(in io.Reader, out io.Writer, allowPath, eventsPath, module string) int {
	allow, err := readAllowList(allowPath)
	if err != nil {
		fmt.Fprintln(out, "testreport:", err)
		return exitUsage
	}
	var events io.Writer = io.Discard
	if eventsPath != "" {
		if err := os.MkdirAll(filepath.Dir(eventsPath), 0o755); err != nil {
			fmt.Fprintln(out, "testreport:", err)
			return exitUsage
		}
		f, err := os.Create(eventsPath)
		if err != nil {
			fmt.Fprintln(out, "testreport:", err)
			return exitUsage
		}
		defer f.Close()
		events = f
	}
	r := newReport(out, module)
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := events.Write(line); werr != nil {
				fmt.Fprintln(out, "testreport: write events:", werr)
				return exitUsage
			}
			r.line(line)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintln(out, "testreport: read:", err)
			return exitUsage
		}
	}
	if eventsPath != "" {
		fmt.Fprintf(out, "(the raw events are in %s)\n", eventsPath)
	}
	return r.finish(allow)
}

// modulePath is the module line of the go.mod at p, or "" without one;
// package names are printed and matched relative to it.
func modulePath(p string) string {
	data, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	return ""
}
