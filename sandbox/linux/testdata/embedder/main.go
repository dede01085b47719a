// Command embedder is a program that uses the native backend as a library
// does: no call to anything before its own main. It appends one line to
// the file its first argument names each time its main runs, then runs
// `echo ok` in a fresh session. TestAProgramUsingTheLibraryRunsItsMainOnce
// builds and runs it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
)

func main() {
	f, err := os.OpenFile(os.Args[1], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintln(f, "main ran")
	f.Close()
	ctx := context.Background()
	c, err := linux.New(linux.Options{StateDir: os.Args[2]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := c.Create(ctx, sandbox.Spec{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer s.Close(ctx)
	res, err := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: []string{"echo", "ok"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.Write(res.Stdout)
}
