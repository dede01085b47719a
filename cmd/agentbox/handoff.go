package main

// This package builds two programs (scripts/build.sh builds both):
//
//   - agentbox-full: every command and backend linked in;
//   - agentbox, built with the "lean" and "noegress" tags: the plain exec
//     with the linux and local backends (no manifest, snapshot or network
//     allow-list: see exec_workspace_lean.go). Every other command, and an
//     exec that needs more, hands off to agentbox-full beside it (an exec
//     of the file openFull checked, same arguments, same environment).
//
// Why: a Go program runs the initialisers of every package it links before
// main. The agent harness, the Docker client and JSON-schema checks bring
// the OpenAI SDK, moby, OpenTelemetry, gRPC and a schema compiler that
// compiles its metaschemas at start: 30 ms before main on the machine
// bench/README.md reports, on every `agentbox exec`, for code exec never
// runs. The lean build starts in about 8 ms. A plain `go build
// ./cmd/agentbox` gives the full program under the name agentbox, which
// needs no companion.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// fullName is the full program's file name, looked up next to the lean
// one.
const fullName = "agentbox-full"

// handedOffEnv is set by the lean build in the environment of the
// agentbox-full it hands off to; the full build removes it first thing.
const handedOffEnv = "AGENTBOX_HANDED_OFF"

// fullOnlyBackends are the exec backends the lean build does not link.
var fullOnlyBackends = []string{"docker"}

// handOff, set by the lean build, replaces this process with
// agentbox-full run with the same arguments; what names the command for
// the error it returns when it cannot. Nil in the full build.
var handOff func(what string) error

// openFull opens dir's agentbox-full (O_PATH, close-on-exec) when it is
// safe to run: a regular ELF executable, not a symbolic link, not writable
// by group or others, owned by root or by owner (the owner of the lean
// agentbox: whoever could replace it could replace agentbox too), in a
// directory owned likewise where no one else can put another file in its
// place.
//
// Threat: a check of the path followed by an exec of the path runs
// whatever is there by then. The checks here are of the descriptor, which
// execFull runs; a symbolic link is refused rather than followed, since
// whoever controls its target's directory controls what runs.
//
// Only the lean build runs it; both have it, so that the tests of both
// check it.
func openFull(dir string, owner uint32) (int, error) {
	p := filepath.Join(dir, fullName)
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	var dst unix.Stat_t
	if err := unix.Fstat(dfd, &dst); err != nil {
		return -1, fmt.Errorf("stat %s: %w", dir, err)
	}
	switch {
	case dst.Uid != 0 && dst.Uid != owner:
		return -1, fmt.Errorf("refusing to run %s: its directory is owned by uid %d, neither root nor the owner of agentbox (uid %d)", p, dst.Uid, owner)
	case dst.Mode&0o022 != 0 && dst.Mode&unix.S_ISVTX == 0:
		// Without the sticky bit anyone who can write the directory can
		// rename a file of their choosing (a hard link to a root-owned
		// program, say) over agentbox-full.
		return -1, fmt.Errorf("refusing to run %s: its directory is writable by group or others (%s) and not sticky; chmod go-w %s", p, os.ModeDir|os.FileMode(dst.Mode&0o777), dir)
	}

	fd, err := unix.Openat(dfd, fullName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", p, err)
	}
	if err := checkFull(fd, p, owner); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// checkFull checks the file fd, opened as p, as openFull describes.
func checkFull(fd int, p string, owner uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("refusing to run %s: it is a symbolic link; put the program itself there", p)
	case st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", p)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("refusing to run %s: it is writable by group or others (%s); chmod go-w it", p, os.FileMode(st.Mode&0o777))
	case st.Uid != 0 && st.Uid != owner:
		return fmt.Errorf("refusing to run %s: owned by uid %d, neither root nor the owner of agentbox (uid %d)", p, st.Uid, owner)
	}
	// execFull runs the file from a close-on-exec descriptor, which a #!
	// script cannot be run from (see there): say so here rather than leave
	// its interpreter to fail after the exec. A file this process may not
	// read (mode 0711) is run unchecked; the kernel reads it anyway.
	r, err := unix.Open(fdPath(fd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(r)
	magic := make([]byte, 4)
	if n, _ := unix.Pread(r, magic, 0); n != 4 || string(magic) != "\x7fELF" {
		return fmt.Errorf("%s is not an ELF executable (a script cannot be handed off to)", p)
	}
	return nil
}

// fdPath names descriptor fd of this process in /proc.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
