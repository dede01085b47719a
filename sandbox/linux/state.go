package linux

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// handles is the linux backend's part of a sandbox.State: where the
// session's host-side state lives and how to reach and end its init.
type handles struct {
	// StateDir is the session's host-only directory (control socket,
	// init log, state.json, a disk image).
	StateDir string `json:"state_dir"`
	// Socket is the init's control socket.
	Socket string `json:"socket"`
	// InitPID is the init's pid on the host; InitAlive tells it from a
	// recycled one.
	InitPID int `json:"init_pid"`
	// IDBase is the first host id of the session's user namespace (0 for
	// a rootless session, which maps the caller's own id only).
	IDBase uint32 `json:"id_base,omitempty"`
	// Landlock is the init's report of the landlock domain it entered.
	Landlock string `json:"landlock,omitempty"`
	// Deadline is when the session timeout ends the session.
	Deadline time.Time `json:"deadline,omitzero"`
	// ProxyPort is the egress proxy's port on the sandbox's loopback, kept
	// so that a resumed session serves its proxy where commands look.
	ProxyPort int `json:"proxy_port,omitempty"`
	// DiskImage is the workspace's size-limited image, when it has one.
	DiskImage string `json:"disk_image,omitempty"`
	// WorkspaceTmpfs says the session's own workspace is a size-limited
	// tmpfs mounted on its directory (the default bound when there is no
	// DiskImage).
	WorkspaceTmpfs bool `json:"workspace_tmpfs,omitempty"`
	// Owner is the process the session belongs to (none when detached):
	// its reaper ends the session when that process ends, and `agentbox
	// gc` should the reaper have been killed too.
	Owner *owner `json:"owner,omitempty"`
	// MadeDirs are the mount points of missing denied paths the init made
	// on the host, for the session's end to remove (see denydirs.go).
	MadeDirs []madeDir `json:"deny_mount_points,omitempty"`
}

// decodeHandles reads st's handles, a version 1 state's strings included.
func decodeHandles(st sandbox.State) (handles, error) {
	var h handles
	err := sandbox.DecodeHandles(st, &h, func(old map[string]string) error {
		h.StateDir, h.Socket, h.Landlock, h.DiskImage = old["state_dir"], old["socket"], old["landlock"], old["disk_image"]
		for _, n := range []struct {
			key string
			dst *int
		}{{"init_pid", &h.InitPID}, {"proxy_port", &h.ProxyPort}} {
			if v := old[n.key]; v != "" {
				i, err := strconv.Atoi(v)
				if err != nil {
					return fmt.Errorf("%s %q: %w", n.key, v, err)
				}
				*n.dst = i
			}
		}
		if v := old["deadline"]; v != "" {
			ns, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("deadline %q: %w", v, err)
			}
			h.Deadline = time.Unix(0, ns)
		}
		if v := old["deny_mount_points"]; v != "" {
			if err := json.Unmarshal([]byte(v), &h.MadeDirs); err != nil {
				return fmt.Errorf("deny_mount_points: %w", err)
			}
		}
		return nil
	})
	return h, err
}

// withDefaults fills what a state that names only a session (an id, as
// from a listing) leaves out: its handles as the session directory's
// state.json has them, else its directory and socket where the client
// keeps them.
func (c *Client) withDefaults(st sandbox.State, h handles) handles {
	if h.StateDir == "" {
		h.StateDir = c.sessionDir(st.ID)
	}
	if h.InitPID == 0 {
		if saved, err := readState(h.StateDir); err == nil && saved.ID == st.ID {
			if sh, err := decodeHandles(saved); err == nil {
				h = sh
			}
		}
	}
	if h.StateDir == "" {
		h.StateDir = c.sessionDir(st.ID)
	}
	if h.Socket == "" {
		h.Socket = filepath.Join(h.StateDir, "control.sock")
	}
	return h
}

// readState reads the state.json of a session directory.
func readState(dir string) (sandbox.State, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return sandbox.State{}, err
	}
	return sandbox.UnmarshalState(b)
}

// writeState writes st as state.json in dir, whole or not at all.
func writeState(dir string, st sandbox.State) error {
	b, err := sandbox.MarshalState(st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".state.json")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write session state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "state.json")); err != nil {
		return fmt.Errorf("write session state: %w", err)
	}
	return nil
}

// InitPID is the host pid of the init of the native session st
// describes, for tools that measure or watch it.
func InitPID(st sandbox.State) (int, error) {
	h, err := decodeHandles(st)
	if err != nil {
		return 0, err
	}
	if h.InitPID <= 0 {
		return 0, sandbox.Errorf(sandbox.ErrInvalid, "linux: state %s names no init", st)
	}
	return h.InitPID, nil
}

// workspaceMounted reports whether the session's workspace is a mount of
// its own (an image or a tmpfs), gone with the session: such a workspace
// is rebuilt from a snapshot, never adopted.
func (h handles) workspaceMounted() bool { return h.DiskImage != "" || h.WorkspaceTmpfs }
