//go:build lean

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// The lean build's stand-ins for the commands it does not link: each
// takes its arguments unparsed (so --help reaches the real command) and
// hands off to agentbox-full, as do `agentbox help CMD` and shell
// completion (`agentbox __complete CMD ...`, which would otherwise offer
// files for the subcommands and flags only the full program knows).
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
			cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
				err := handOff(c.name)
				cobra.CompErrorln(err.Error())
				return nil, cobra.ShellCompDirectiveError
			}
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

// findFull opens the agentbox-full next to the running executable, checked
// as openFull does against the owner of this executable, and returns the
// descriptor and its path.
func findFull() (int, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return -1, "", fmt.Errorf("find this executable: %w", err)
	}
	// /proc/self/exe is the file this process runs, even if exe has been
	// replaced since.
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &self); err != nil {
		return -1, "", fmt.Errorf("stat this executable: %w", err)
	}
	dir := filepath.Dir(exe)
	p := filepath.Join(dir, fullName)
	fd, err := openFull(dir, self.Uid)
	if errors.Is(err, os.ErrNotExist) {
		return -1, "", fmt.Errorf("%s is the lean agentbox (the plain exec only) and %s is not beside it; build both with scripts/build.sh, or build the full program alone with go build ./cmd/agentbox", exe, fullName)
	}
	return fd, p, err
}

// execFull replaces this process with agentbox-full and the same
// arguments; it returns only on failure.
func execFull(what string) error {
	fd, p, err := findFull()
	if err != nil {
		return &exitError{code: exitCode, err: fmt.Errorf("%s: %w", what, err)}
	}
	defer unix.Close(fd) // reached only if the exec fails
	if os.Getenv(handedOffEnv) != "" {
		// Threat: an agentbox-full that is a lean build itself (a copy
		// or a hard link) would hand off to itself forever.
		return &exitError{code: exitCode, err: fmt.Errorf("%s: %s is a lean agentbox too (it handed off again); build the full program with scripts/build.sh", what, p)}
	}
	// The exec is of the checked file itself, through its descriptor:
	// /proc/self/fd/N leads to the open file, not to whatever the path
	// names by now. Not execveat(fd, "", AT_EMPTY_PATH), which needs no
	// /proc (os.Executable needs it anyway): golang.org/x/sys/unix has no
	// wrapper, and a raw system call would skip what syscall.Exec does
	// first (restore the soft RLIMIT_NOFILE the Go runtime raised, so that
	// agentbox-full and the sandboxed commands it starts do not inherit
	// the raised limit; hold the runtime's lock against new threads).
	//
	// The descriptor is close-on-exec so that it leaks neither into
	// agentbox-full nor into the sandboxes it starts. The kernel has
	// opened the file before it closes the descriptor, which is all an
	// ELF program needs; a script's interpreter would be given
	// /proc/self/fd/N to open once it is closed (with execveat the kernel
	// refuses it, ENOENT), which is why checkFull wants an ELF file.
	argv := append([]string{p}, os.Args[1:]...)
	err = syscall.Exec(fdPath(fd), argv, append(os.Environ(), handedOffEnv+"=1"))
	return &exitError{code: exitCode, err: fmt.Errorf("%s: run %s: %w", what, p, err)}
}
