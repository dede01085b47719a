//go:build lean

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// The lean build's stand-ins for the commands it does not link: each
// takes its arguments unparsed (so --help reaches the real command) and
// hands off to agentbox-full, as does `agentbox help CMD`.
func init() {
	handOff = execFull
	for _, c := range fullOnly {
		register(func() *cobra.Command {
			cmd := &cobra.Command{
				Use:                c.name,
				Short:              c.short,
				DisableFlagParsing: true,
				RunE: func(*cobra.Command, []string) error {
					return handOff(c.name)
				},
			}
			cmd.SetHelpFunc(func(*cobra.Command, []string) {
				if err := handOff(c.name); err != nil {
					fail(err)
				}
			})
			return cmd
		})
	}
}

// fullOnly are the commands the lean build does not link, with their short
// help, which the lean build's root help lists.
// TestLeanBuildListsTheSameCommandsAsTheFullOne checks that the two
// builds agree.
var fullOnly = []struct{ name, short string }{
	{"backends", "Show which policy parts each backend enforces on this host"},
	{"gc", "Remove sandboxes left behind by a crashed agentbox"},
	{"image", "Manage the docker backend's base image"},
	{"promote", "Copy checked outputs out of a workspace, with a provenance record"},
	{"run", "Run an AI agent whose commands and file edits are confined to a sandbox"},
	{"snapshot", "List, inspect, save, restore, export and delete workspace snapshots"},
	{"trace", "Inspect agent run traces (JSONL)"},
}

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
	if os.Getenv(handedOffEnv) != "" {
		// Threat: an agentbox-full that is a lean build itself (a copy
		// or a link) would hand off to itself forever.
		return &exitError{code: exitCode, err: fmt.Errorf("%s: %s is a lean agentbox too (it handed off again); build the full program with scripts/build.sh", what, p)}
	}
	argv := append([]string{p}, os.Args[1:]...)
	err = syscall.Exec(p, argv, append(os.Environ(), handedOffEnv+"=1"))
	return &exitError{code: exitCode, err: fmt.Errorf("%s: run %s: %w", what, p, err)}
}
