package linux

import (
	"github.com/agentbox/agentbox/sandbox"
)

// initConfig is everything the parent tells a session's init, sent as
// one JSON packet on the setup socket. Nothing else crosses.
type initConfig struct {
	ID string `json:"id"`
	// Root is the host directory the init mounts its root tmpfs on (in
	// its own mount namespace; the host sees an empty directory).
	Root string `json:"root"`
	// Workspace is the host directory bound read-write at Workdir.
	Workspace string          `json:"workspace"`
	Workdir   string          `json:"workdir"`
	Mounts    []sandbox.Mount `json:"mounts,omitempty"`
	ReadOnly  []string        `json:"read_only,omitempty"`
	Deny      []string        `json:"deny,omitempty"`
	UID       int             `json:"uid"`
	GID       int             `json:"gid"`
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
	// Tracking is "v1" or "v2" when fd 5 is the session's tracking group
	// directory, in which the init makes one group per command (see
	// cgroups.Group.Tracking); "" when there is none.
	Tracking string `json:"tracking,omitempty"`
	// JoinGroups is how many v1 group directories follow, from fd
	// fdJoinFirst on, that the spawning thread joins (see
	// cgroups.Group.ThreadDirs).
	JoinGroups int `json:"join_groups,omitempty"`
	// Rootless says the init runs in a user namespace of its own, where
	// only the sandbox user (UID, GID) maps to a host id: the invoking
	// user's.
	Rootless bool `json:"rootless,omitempty"`
}

// initReady is the init's answer on the setup socket once it serves (or
// why it could not).
type initReady struct {
	Error    string   `json:"error,omitempty"`
	Landlock string   `json:"landlock,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// File descriptors the init is started with (after stdin, stdout, stderr).
const (
	fdSetup    = 3 // setup socket: config in, ready out
	fdControl  = 4 // listening control socket
	fdTracking = 5 // session tracking group directory, when Tracking
	// fdJoinFirst is the first of the v1 group directories to join.
	fdJoinFirst = 6
)
