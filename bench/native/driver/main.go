// Command driver measures agentbox's native backend against its peers in
// one run on this machine and prints a Markdown report:
//
//   - cold start: `agentbox exec -- true` against bubblewrap doing
//     comparable confinement, `unshare` of the same namespaces, and a bare
//     /bin/true, interleaved round by round; plus the same cold start
//     through the library in this process, split into Create, Exec, Close;
//   - exec in a live session: Session.Exec of /bin/true against an os/exec
//     of it, alternated;
//   - idle session host memory: PSS of the session's host-side processes,
//     as installed (agentbox-init as the init) and in the fallback
//     (agentbox re-executing itself);
//   - many concurrent sessions: failures, wall time, peak host memory.
//
// It needs root (the linux backend does) and is normally run by
// bench/native/run.sh. Its sessions run agentbox-init when it sits next
// to the driver (run.sh builds both into bin/), else the driver itself
// (the backend's init package takes such a process over before main).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/sandbox/linux/cgroups"
	"golang.org/x/sys/unix"
)

func main() {
	var o opts
	flag.StringVar(&o.agentbox, "agentbox", "bin/agentbox", "the agentbox binary for the command-line runs")
	flag.StringVar(&o.bwrap, "bwrap", "bwrap", "the bubblewrap binary")
	flag.StringVar(&o.unshare, "unshare", "unshare", "the util-linux unshare binary")
	flag.IntVar(&o.coldN, "cold", 50, "cold-start rounds")
	flag.DurationVar(&o.gap, "gap", 50*time.Millisecond, "quiet time before each cold-start run (0: back to back)")
	flag.IntVar(&o.execN, "exec", 500, "exec rounds in a live session")
	flag.IntVar(&o.sessions, "sessions", 100, "concurrent sessions")
	flag.StringVar(&o.only, "only", "cold,live,session,idle,many", "comma-separated sections to run")
	flag.StringVar(&o.readme, "readme", "", "also write the report into this file between its bench/native markers")
	noop := flag.Bool("noop", false, "exit at once (the driver's own process start, for the breakdown)")
	flag.Parse()
	if *noop {
		return
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/native:", err)
		os.Exit(1)
	}
}

type opts struct {
	agentbox, bwrap, unshare string
	coldN, execN, sessions   int
	gap                      time.Duration
	only, readme             string
}

func (o opts) want(section string) bool {
	for _, s := range strings.Split(o.only, ",") {
		if strings.TrimSpace(s) == section {
			return true
		}
	}
	return false
}

// cliSpec is what `agentbox exec` asks for by default, so that the
// library runs match the command-line ones.
var cliSpec = sandbox.Spec{Policy: sandbox.Policy{
	Network:   sandbox.NetworkPolicy{Mode: sandbox.NetworkNone},
	Resources: sandbox.Resources{MemoryBytes: 1 << 30, Pids: 512},
}}

func run(o opts, out io.Writer) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the linux backend needs root (euid %d)", os.Geteuid())
	}
	ctx := context.Background()
	c, err := linux.New(linux.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fmt.Errorf("start the linux backend: %w", err)
	}
	r := &results{when: time.Now(), loadStart: loadAvg()}
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench/native: "+format+"\n", a...) }

	if o.want("cold") {
		if o.bwrap, err = lookPath(o.bwrap); err != nil {
			return err
		}
		if o.unshare, err = lookPath(o.unshare); err != nil {
			return err
		}
		ws, err := os.MkdirTemp("", "bench-bwrap-ws-")
		if err != nil {
			return fmt.Errorf("create the bwrap workspace: %w", err)
		}
		defer os.RemoveAll(ws)
		if err := os.Chmod(ws, 0o777); err != nil { // bwrap's uid 1000 maps to no host owner
			return fmt.Errorf("open the bwrap workspace to its sandbox user: %w", err)
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this driver: %w", err)
		}
		peer, err := newInCgroup(cgroups.Limits{MemoryBytes: cliSpec.Policy.Resources.MemoryBytes, Pids: cliSpec.Policy.Resources.Pids})
		if err != nil {
			return fmt.Errorf("cgroups for the bwrap peer: %w", err)
		}
		full := *peer
		if full.filter, err = seccompProgram(); err != nil {
			return fmt.Errorf("seccomp filter for the bwrap peer: %w", err)
		}
		fullArgv := append(bwrapArgs(o.bwrap, ws), "--seccomp", "3", "true")
		// The same CLI with its session state on a tmpfs, as /run is on a
		// standard host (on this one it may be on disk: see the notes of
		// agentbox backends).
		stateDir, err := tmpfsDir()
		if err != nil {
			return err
		}
		defer os.RemoveAll(stateDir)
		cmds := []command{
			cAgentbox: {name: "agentbox exec -- true", argv: []string{o.agentbox, "exec", "--", "true"}},
			cBwrap:    {name: "bwrap (namespaces and mounts like a session) true", argv: bwrapArgs(o.bwrap, ws, "true")},
			cBwrapCG:  {name: "bwrap in a fresh cgroup with the same limits (made and removed around it) true", argv: bwrapArgs(o.bwrap, ws, "true"), run: peer.time},
			cUnshare:  {name: "unshare (same namespaces) --fork true", argv: unshareArgs(o.unshare, "true")},
			cBare:     {name: "bare /bin/true", argv: []string{"/bin/true"}},
			cHelp:     {name: "agentbox --help (the CLI's process start and package inits)", argv: []string{o.agentbox, "--help"}},
			cSelf:     {name: "bench-native -noop (a small Go binary's process start)", argv: []string{self, "-noop"}},
			cFull:     {name: "agentbox-full exec -- true (the CLI with every command linked in)", argv: []string{fullCLI(o.agentbox), "exec", "--", "true"}},
			cBwrapAll: {name: "bwrap in a fresh cgroup with the same limits and agentbox's seccomp filter (--seccomp) true", argv: fullArgv, run: full.time},
			cTmpfs: {name: "agentbox exec -- true, session state on a tmpfs (AGENTBOX_STATE_DIR)", argv: []string{o.agentbox, "exec", "--", "true"},
				env: []string{"AGENTBOX_STATE_DIR=" + stateDir}},
		}
		progress("cold start, %d interleaved rounds of %d contenders, %s quiet before each run", o.coldN, len(cmds)+1, o.gap)
		r.gap = o.gap
		if r.cold, err = runCold(ctx, o.coldN, o.gap, cmds, c, cliSpec); err != nil {
			return fmt.Errorf("cold start: %w", err)
		}
	}
	if o.want("live") {
		progress("exec in a live session, %d rounds", o.execN)
		s, err := c.Create(ctx, cliSpec)
		if err != nil {
			return fmt.Errorf("create the live session: %w", err)
		}
		r.live, err = runLive(ctx, o.execN, s)
		if cerr := s.Close(ctx); cerr != nil && err == nil {
			err = fmt.Errorf("close the live session: %w", cerr)
		}
		if err != nil {
			return fmt.Errorf("live exec: %w", err)
		}
	}
	if o.want("session") {
		progress("a command in a live session through the command line, %d rounds", o.execN/5)
		if r.session, err = runSessionCLI(o.execN/5, o.agentbox); err != nil {
			return fmt.Errorf("exec --session: %w", err)
		}
	}
	if o.want("idle") {
		progress("idle session memory")
		if r.idleCLI, r.cliClient, err = idleCLI(o.agentbox); err != nil {
			return fmt.Errorf("idle memory through the command line: %w", err)
		}
		// The fallback when agentbox-init is not installed: agentbox
		// re-executes itself as the init.
		self, err := filepath.Abs(o.agentbox)
		if err != nil {
			return fmt.Errorf("locate %s: %w", o.agentbox, err)
		}
		cf, err := linux.New(linux.Options{InitBinary: self, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return fmt.Errorf("start the linux backend with %s as init: %w", self, err)
		}
		if r.idleLib, err = idleLib(ctx, cf, cliSpec); err != nil {
			return fmt.Errorf("idle memory with agentbox as its own init: %w", err)
		}
	}
	if o.want("many") {
		progress("%d concurrent sessions", o.sessions)
		if r.many, err = runMany(ctx, o.sessions, c, cliSpec); err != nil {
			return fmt.Errorf("concurrent sessions: %w", err)
		}
		progress("%d concurrent agentbox exec", o.sessions)
		if r.manyCLI, err = runManyCLI(o.sessions, o.agentbox); err != nil {
			return fmt.Errorf("concurrent agentbox exec: %w", err)
		}
	}
	r.took = time.Since(r.when)
	var buf bytes.Buffer
	r.write(&buf)
	if _, err := out.Write(buf.Bytes()); err != nil {
		return err
	}
	if o.readme != "" {
		return updateReadme(o.readme, buf.Bytes())
	}
	return nil
}

// lookPath resolves a tool for a clear error before any measurement.
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not installed: %w", name, err)
	}
	return p, nil
}

// fullCLI is the agentbox-full next to the lean agentbox scripts/build.sh
// makes, or agentbox itself when it was built whole (go build ./cmd/agentbox).
func fullCLI(agentbox string) string {
	p := filepath.Join(filepath.Dir(agentbox), "agentbox-full")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return agentbox
}

// tmpfsDir makes a private directory on a tmpfs (/dev/shm) for a CLI's
// session state.
func tmpfsDir() (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return "", fmt.Errorf("/dev/shm is not a tmpfs here: no place for the tmpfs state contender")
	}
	d, err := os.MkdirTemp("/dev/shm", "bench-native-state-")
	if err != nil {
		return "", fmt.Errorf("state directory on /dev/shm: %w", err)
	}
	return d, nil
}
