package linux

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// A session belongs to the process that made it unless its spec says
// Detached: when that process ends, however it ends (exit, a crash,
// SIGPIPE, kill -9), the session ends too, and nothing of it is left on
// the host. The kernel is what notices: the process holds the write end
// of a pipe (its lifeline) whose read end is the standard input of a
// reaper, this same program started again under the name reaperName, in
// a session of its own so that the terminal's signals do not reach it.
// Clients register each session before they make anything of it and
// withdraw it once it is gone; when the pipe ends, which it does when the
// last holder of the write end is gone (the descriptor is close-on-exec
// and passed to no child), the reaper deletes every session still
// registered, as Delete does. One idle reaper serves every client of a
// process, from its first owned session on.

// reaperName is the reaper's argv[0]; this package's init takes over a
// process started under it (see below).
const reaperName = "agentbox-linux-reaper"

// The reaper runs in whatever program linked this package, started again
// from /proc/self/exe: that program made the clients, so it can delete
// their sessions, whatever it is (the CLI, a server, a test binary).
func init() {
	if filepath.Base(os.Args[0]) == reaperName {
		os.Exit(reap(os.Stdin))
	}
}

// registration is one line on the lifeline: a session to delete should
// this process end (Own), or no longer (!Own), with what a client needs
// to delete it.
type registration struct {
	Own      bool    `json:"own"`
	ID       string  `json:"id,omitempty"`
	StateDir string  `json:"state_dir,omitempty"`
	IDs      IDRange `json:"ids"`
	// Dir, instead of a session, is a scratch directory (scratch.go).
	Dir string `json:"dir,omitempty"`
}

// key names the session or directory a registration is about.
func (r registration) key() string {
	if r.Dir != "" {
		return "dir\x00" + r.Dir
	}
	return r.StateDir + "\x00" + r.ID
}

// valid says whether the reaper may act on r: a session id that is a
// path component in an absolute state directory, or a clean absolute
// directory.
func (r registration) valid() bool {
	if r.Dir != "" {
		return filepath.IsAbs(r.Dir) && filepath.Clean(r.Dir) == r.Dir && r.Dir != "/"
	}
	return validID(r.ID) && filepath.IsAbs(r.StateDir)
}

// life is this process's lifeline.
var life struct {
	mu    sync.Mutex
	w     *os.File                // the pipe to the reaper; nil until the first owned session
	owned map[string]registration // what the reaper must delete should this process end now
}

// own registers session id before anything of it exists. A reaper that
// died (killed by hand) is replaced, and told every session again.
func (c *Client) own(id string) error {
	if err := register(registration{Own: true, ID: id, StateDir: c.opts.StateDir, IDs: c.slots.block}); err != nil {
		return sandbox.Wrap("linux: create", sandbox.ErrUnavailable, fmt.Errorf("start the reaper that ends this process's sessions with it: %w", err))
	}
	return nil
}

// disown tells the reaper session id is gone (closed or deleted by this
// process), so it has nothing to do for it.
func (c *Client) disown(id string) {
	withdraw(registration{ID: id, StateDir: c.opts.StateDir})
}

// register puts r on the lifeline, starting the reaper on first use or
// again when it died, in which case it is told every registration again.
func register(r registration) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	life.mu.Lock()
	defer life.mu.Unlock()
	if life.owned == nil {
		life.owned = map[string]registration{}
	}
	life.owned[r.key()] = r
	if life.w != nil {
		if _, err := life.w.Write(append(line, '\n')); err == nil {
			return nil
		}
		life.w.Close()
		life.w = nil
	}
	if life.w, err = startReaper(); err == nil {
		var all []byte
		for _, o := range life.owned {
			b, _ := json.Marshal(o)
			all = append(append(all, b...), '\n')
		}
		if _, err = life.w.Write(all); err != nil {
			life.w.Close()
			life.w = nil
		}
	}
	if err != nil {
		delete(life.owned, r.key())
		return err
	}
	return nil
}

// withdraw takes r (its key) off the lifeline.
func withdraw(r registration) {
	r.Own = false
	life.mu.Lock()
	defer life.mu.Unlock()
	if _, ok := life.owned[r.key()]; !ok {
		return
	}
	delete(life.owned, r.key())
	if line, err := json.Marshal(r); err == nil && life.w != nil {
		_, _ = life.w.Write(append(line, '\n'))
	}
}

// startReaper starts this program as the reaper of this process's
// sessions and returns the write end of its lifeline.
func startReaper() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args[0] = reaperName
	cmd.Stdin = r
	cmd.Env = []string{} // it needs none; a secret in this environment stays here
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	go func() { _ = cmd.Wait() }() // should it die before this process does
	return w, nil
}

// reap is the reaper's main: it keeps the set of registered sessions
// until its input ends, then deletes those left. Failures go to
// reaper.log in the session's state directory (its output goes nowhere:
// it outlives the terminal or pipe of the process it watched); `agentbox
// gc` finds what it could not remove.
func reap(in io.Reader) int {
	owned := map[string]registration{}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r registration
		if json.Unmarshal(sc.Bytes(), &r) != nil || !r.valid() {
			continue
		}
		if r.Own {
			owned[r.key()] = r
		} else {
			delete(owned, r.key())
		}
	}
	code := 0
	clients := map[string]*Client{}
	var dirs []string
	for _, r := range owned {
		if r.Dir != "" {
			dirs = append(dirs, r.Dir) // after the sessions, which may use them
			continue
		}
		fail := func(err error) {
			code = 1
			f, ferr := os.OpenFile(filepath.Join(r.StateDir, "reaper.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if ferr != nil {
				return
			}
			defer f.Close()
			fmt.Fprintf(f, "%s reaper %d: session %s of a process that ended: %v\n", time.Now().UTC().Format(time.RFC3339), os.Getpid(), r.ID, err)
		}
		c := clients[r.StateDir]
		if c == nil {
			var err error
			c, err = New(Options{StateDir: r.StateDir, IDs: r.IDs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				fail(err)
				continue
			}
			clients[r.StateDir] = c
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.Delete(ctx, sandbox.State{Version: sandbox.StateVersion, Backend: c.Name(), ID: r.ID})
		cancel()
		if err != nil {
			fail(err)
		}
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			code = 1
		}
	}
	return code
}

// validID accepts what newID makes: a session id is a path component.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// owner names a process beyond pid reuse: its pid and its start time
// (clock ticks after boot, field 22 of /proc/PID/stat).
type owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// self is this process as an owner.
func self() (*owner, error) {
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return nil, fmt.Errorf("read this process's start time: %w", err)
	}
	return &owner{PID: pid, Start: start}, nil
}

// alive reports whether o still runs (a zombie does not).
func (o *owner) alive() bool {
	start, err := startTime(o.PID)
	return err == nil && start == o.Start
}

// startTime reads pid's start time; a zombie's is an error.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (the state); the start time is field 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Orphaned reports whether st is a session whose owner is gone: it
// should have ended with it (its reaper failed or was killed too), and
// Delete removes it.
func (c *Client) Orphaned(st sandbox.State) bool {
	h, err := c.stateOf(st)
	return err == nil && h.Owner != nil && !h.Owner.alive()
}
