package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// This package builds two programs (scripts/build.sh builds both):
//
//   - agentbox-full: every command and backend linked in;
//   - agentbox, built with the "lean" tag: exec with the linux and local
//     backends, and snapshot. Every other command, and exec with another
//     backend, hands off to agentbox-full beside it (execve, same
//     arguments, same environment).
//
// Why: a Go program runs the initialisers of every package it links before
// main. The agent harness, the Docker client and JSON-schema checks bring
// the OpenAI SDK, moby, OpenTelemetry, gRPC and a schema compiler that
// compiles its metaschemas at start: 30 ms before main on the machine
// bench/README.md reports, on every `agentbox exec`, for code exec never
// runs. The lean build starts in about 8 ms. A plain `go build
// ./cmd/agentbox` gives the full program under the name agentbox, which
// needs no companion.

// fullName is the full program's file name, looked up next to the lean
// one.
const fullName = "agentbox-full"

// fullOnly are the commands the lean build does not link, with their short
// help, which the lean build's root help lists. TestLeanCommandsMatchFull
// checks that the two builds agree.
var fullOnly = []struct{ name, short string }{
	{"backends", "Show which policy parts each backend enforces on this host"},
	{"gc", "Remove sandboxes left behind by a crashed agentbox"},
	{"image", "Manage the docker backend's base image"},
	{"promote", "Copy checked outputs out of a workspace, with a provenance record"},
	{"run", "Run an AI agent whose commands and file edits are confined to a sandbox"},
	{"trace", "Inspect agent run traces (JSONL)"},
}

// fullOnlyBackends are the exec backends the lean build does not link.
var fullOnlyBackends = []string{"docker"}

// handOff, set by the lean build, replaces this process with
// agentbox-full run with the same arguments; what names the command for
// the error it returns when it cannot. Nil in the full build.
var handOff func(what string) error

// findFull returns the agentbox-full next to the running executable when
// it is safe to run: a regular executable file, not writable by group or
// others, owned by root or by the owner of this executable (so that
// whoever could replace it could replace agentbox too).
func findFull() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable: %w", err)
	}
	p := filepath.Join(filepath.Dir(exe), fullName)
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s is the lean agentbox (exec and snapshot only) and %s is not beside it; build both with scripts/build.sh, or build the full program alone with go build ./cmd/agentbox", exe, fullName)
	}
	if err != nil {
		return "", err
	}
	self, err := os.Stat(exe)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	own, ok2 := self.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s is not an executable file", p)
	case fi.Mode()&0o022 != 0:
		return "", fmt.Errorf("refusing to run %s: it is writable by group or others (%s)", p, fi.Mode().Perm())
	case !ok || !ok2 || (st.Uid != 0 && st.Uid != own.Uid):
		return "", fmt.Errorf("refusing to run %s: owned by uid %d, neither root nor the owner of %s", p, st.Uid, exe)
	}
	return p, nil
}

// execFull replaces this process with agentbox-full and the same
// arguments; it returns only on failure.
func execFull(what string) error {
	p, err := findFull()
	if err != nil {
		return &exitError{code: exitCode, err: fmt.Errorf("%s: %w", what, err)}
	}
	argv := append([]string{p}, os.Args[1:]...)
	err = syscall.Exec(p, argv, os.Environ())
	return &exitError{code: exitCode, err: fmt.Errorf("%s: run %s: %w", what, p, err)}
}
