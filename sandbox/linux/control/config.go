package control

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// Config is everything the parent tells a session's init, sent as
// one JSON packet on the setup socket. Nothing else crosses.
type Config struct {
	ID string `json:"id"`
	// Root is where, in its own mount namespace, the init mounts the tmpfs
	// it builds the sandbox's root on: RootMountPoint, which any uid
	// reaches (as root, the init's ids are no host account's), or, for a
	// rootless session, the session directory.
	Root string `json:"root"`
	// Workspace is the host directory bound read-write at Workdir.
	Workspace string          `json:"workspace"`
	Workdir   string          `json:"workdir"`
	Mounts    []sandbox.Mount `json:"mounts,omitempty"`
	// Idmapped says the workspace and the Mounts' sources come with the
	// config as detached mounts (see Sources), idmapped so that their
	// owners' files are the session user's, for move_mount to put in
	// place: the init walks no host path to them. Otherwise (rootless)
	// the init binds them by path, as the user it runs as.
	Idmapped bool     `json:"idmapped,omitempty"`
	ReadOnly []string `json:"read_only,omitempty"`
	Deny     []string `json:"deny,omitempty"`
	UID      int      `json:"uid"`
	GID      int      `json:"gid"`
	// Network is the effective network mode; with NetworkHost the init
	// keeps the host's network namespace (only with AllowWeaker).
	Network sandbox.NetworkMode `json:"network"`
	// TmpBytes sizes /tmp and /dev/shm.
	TmpBytes int64 `json:"tmp_bytes"`
	// FileSize is RLIMIT_FSIZE for commands; NoFile is RLIMIT_NOFILE.
	FileSize int64  `json:"file_size"`
	NoFile   uint64 `json:"no_file"`
	// SessionTimeout (nanoseconds, 0 for none) ends the session that
	// long after it is ready.
	SessionTimeout int64 `json:"session_timeout,omitempty"`
	// IdleTimeout (nanoseconds, 0 for none) ends the session once no
	// control connection has been open for that long (a running command
	// holds its connection open).
	IdleTimeout int64 `json:"idle_timeout,omitempty"`
	// Rootless says the init runs in a user namespace of its own, where
	// only the sandbox user (UID, GID) maps to a host id: the invoking
	// user's. Otherwise the session's user namespace maps sessionIDs ids
	// from 0 to a range no host account owns.
	Rootless bool `json:"rootless,omitempty"`
}

// RootMountPoint is the directory the init mounts its root tmpfs on: it
// exists on every host and any uid may enter it.
const RootMountPoint = "/tmp"

// Sources is how many descriptors come with the config after the control
// socket and the log: with Idmapped, the workspace's, then one per mount,
// in order; else none.
func (c *Config) Sources() int {
	if !c.Idmapped {
		return 0
	}
	return 1 + len(c.Mounts)
}

// MaxMounts bounds Spec.Mounts: each comes as a descriptor with the
// config, and one packet carries at most maxPassed.
const MaxMounts = maxPassed - 3

// Ready is the init's answer on the setup socket once it serves (or
// why it could not).
type Ready struct {
	Error    string   `json:"error,omitempty"`
	Landlock string   `json:"landlock,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// File descriptors the init is started with (after stdin, stdout, stderr).
const (
	FdSetup    = 3 // setup socket: config in, ready out
	FdControl  = 4 // listening control socket
	FdTracking = 5 // session tracking group directory, when Tracking
	// FdJoinFirst is the first of the v1 group directories to join.
	// The init program itself follows them (at FdJoinFirst+Join): the
	// child execs it from there, and the init closes it with every other
	// descriptor it does not use.
	FdJoinFirst = 6
)

// Args is what the init must know before it reads its config, passed
// as its arguments (after Marker): which cgroup directories its
// spawning thread joins. The spawning thread joins them first thing, while
// the rest of the set-up goes on (see runInit).
type Args struct {
	// ID is the session's id, there so that a pid can be told to be this
	// session's init and not another's that reused it (see initAlive).
	ID string
	// Tracking is "v1" or "v2" when fd 5 is the session's tracking group
	// directory, in which the init makes one group per command (see
	// cgroups.Group.Tracking); "" when there is none.
	Tracking string
	// Join is how many v1 group directories follow, from fd FdJoinFirst
	// on, that the spawning thread joins (see cgroups.Group.ThreadDirs).
	Join int
	// StateDir is the absolute state directory the session's own
	// directory (StateDir/ID) is in, and MountNS the inode of the mount
	// namespace that path is seen in (the client's). The init does not
	// use them: they are there for `agentbox gc`, which ends an init
	// whose session directory is gone (see linux.Client.Remains) and
	// must know from the process alone which directory that is. They
	// are passed in the init's environment (Env), not its arguments: a
	// sandboxed process reads /proc/1/cmdline, but not /proc/1/environ
	// (the init holds capabilities it has not), and the host's paths
	// are no business of the sandbox. ParseArgs still reads them from
	// the arguments of an init started before.
	StateDir string
	MountNS  uint64
}

// Argv is a as the init's arguments (after Marker): all but StateDir and
// MountNS, which Env carries.
func (a Args) Argv() []string {
	return []string{"id=" + a.ID, "track=" + a.Tracking, "join=" + strconv.Itoa(a.Join)}
}

// The init's environment variables that carry Args.StateDir and MountNS.
const (
	EnvStateDir = "AGENTBOX_INIT_STATE_DIR"
	EnvMountNS  = "AGENTBOX_INIT_MNTNS"
)

// Env is a's StateDir and MountNS as environment variables (none when
// StateDir is "").
func (a Args) Env() []string {
	if a.StateDir == "" {
		return nil
	}
	return []string{EnvStateDir + "=" + a.StateDir, EnvMountNS + "=" + strconv.FormatUint(a.MountNS, 10)}
}

// ReadEnv sets a's StateDir and MountNS from an init's environment
// (/proc/PID/environ split at NULs); what it does not name is left.
func (a *Args) ReadEnv(environ []string) error {
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case EnvStateDir:
			a.StateDir = v
		case EnvMountNS:
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("init environment %q: a namespace's inode number", kv)
			}
			a.MountNS = n
		}
	}
	return nil
}

// ParseArgs reads the init's arguments (after Marker).
func ParseArgs(argv []string) (Args, error) {
	var a Args
	for _, arg := range argv {
		k, v, _ := strings.Cut(arg, "=")
		switch k {
		case "id":
			a.ID = v
		case "track":
			if v != "" && v != "v1" && v != "v2" {
				return a, fmt.Errorf("init argument %q: tracking is v1, v2 or empty", arg)
			}
			a.Tracking = v
		case "join":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 8 {
				return a, fmt.Errorf("init argument %q: join is a count of 0 to 8 groups", arg)
			}
			a.Join = n
		case "state": // an init started before Env carried it
			a.StateDir = v
		case "mntns":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return a, fmt.Errorf("init argument %q: mntns is a namespace's inode number", arg)
			}
			a.MountNS = n
		default:
			return a, fmt.Errorf("unknown init argument %q", arg)
		}
	}
	return a, nil
}

// ToolDirs are the host directories the init binds read-only into every
// sandbox (when one is a symlink, as on a usrmerge host, the same
// symlink is made). A workdir may not lie under one.
var ToolDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}

// UnderDenied reports whether p lies inside another of the denied paths:
// that one's mask hides it already, so the init does nothing for p.
func UnderDenied(p string, deny []string) bool {
	p = path.Clean("/" + p)
	for _, q := range deny {
		q = path.Clean("/" + q)
		if q != "/" && strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// Marker is argv[0] of a process the host client starts as a session's
// init: package nsinit takes over such a process before its main runs.
const Marker = "agentbox-linux-init"
