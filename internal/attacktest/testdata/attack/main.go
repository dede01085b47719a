// Command attack is the escape tests' helper: a static binary copied into
// the sandbox that tries one attack per invocation, through the raw system
// call where shell tools cannot reach it, and reports how the kernel
// answered.
//
// Usage: attack NAME [ARGS...]. Detail lines come first; the last line is
// always "result: ok" (the attack worked) or "result: ERRNO" (the name of
// the error that stopped it, such as EPERM), or "result: error(...)" for
// anything else. The exit status is 0 either way, so that a test tells a
// stopped attack from a helper that did not run.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// attacks maps a name to its implementation; each returns nil when the
// attack succeeded.
var attacks = map[string]func(args []string) error{}

func register(name string, f func(args []string) error) { attacks[name] = f }

func main() {
	if len(os.Args) < 2 {
		names := make([]string, 0, len(attacks))
		for n := range attacks {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintln(os.Stderr, "usage: attack NAME [ARGS...]; names:", strings.Join(names, " "))
		os.Exit(2)
	}
	if os.Args[1] == "batch" {
		// batch runs several attacks in this one process, each given as
		// one argument of space-separated words, each report preceded by
		// a line "=== N".
		for i, words := range os.Args[2:] {
			fmt.Printf("=== %d\n", i)
			run(strings.Fields(words))
		}
		return
	}
	run(os.Args[1:])
}

func run(args []string) {
	f, ok := attacks[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "attack: unknown attack %q\n", args[0])
		os.Exit(2)
	}
	err := f(args[1:])
	fmt.Printf("result: %s\n", errName(err))
}

// errName is "ok" for nil, the errno's name when err wraps one.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		if n := unix.ErrnoName(en); n != "" {
			return n
		}
		return fmt.Sprintf("errno %d", int(en))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "ETIMEDOUT"
	}
	return "error(" + strings.ReplaceAll(err.Error(), "\n", " ") + ")"
}

// errnoOf turns a raw syscall's errno into an error (nil for 0).
func errnoOf(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func need(args []string, n int, usage string) {
	if len(args) < n {
		fmt.Fprintf(os.Stderr, "attack: usage: %s\n", usage)
		os.Exit(2)
	}
}
