package sandbox

import (
	"encoding/json"
	"fmt"
	"time"
)

// StateVersion is the version of the State format written by this code.
const StateVersion = 1

// State is a serializable description of a session: enough for another
// process to reattach to it or, when the sandbox is gone, to rebuild it
// from its workspace or snapshot. It never carries a credential.
type State struct {
	Version int    `json:"version"`
	Backend string `json:"backend"`
	ID      string `json:"id"`
	// Spec is the session's spec, as created (secrets are not serialized).
	Spec Spec `json:"spec"`
	// Workspace is the host directory of the workspace, when there is one.
	Workspace string `json:"workspace,omitempty"`
	// OwnsWorkspace says the session created the workspace and removes it
	// on Close.
	OwnsWorkspace bool `json:"owns_workspace,omitempty"`
	// Snapshot is the latest snapshot taken of the workspace, if any.
	Snapshot string `json:"snapshot,omitempty"`
	// Backend-specific handles (a control socket, an init pid, a
	// container id).
	Handles   map[string]string `json:"handles,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

// MarshalState encodes st as indented JSON.
func MarshalState(st State) ([]byte, error) {
	return json.MarshalIndent(st, "", "  ")
}

// UnmarshalState decodes a State, refusing unknown versions.
func UnmarshalState(data []byte) (State, error) {
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, Errorf(ErrInvalid, "session state: %w", err)
	}
	if st.Version != StateVersion {
		return State{}, Errorf(ErrInvalid, "session state: version %d, this agentbox reads %d", st.Version, StateVersion)
	}
	if st.Backend == "" || st.ID == "" {
		return State{}, Errorf(ErrInvalid, "session state: backend and id are required")
	}
	return st, nil
}

// String is a short description for logs.
func (st State) String() string { return fmt.Sprintf("%s/%s", st.Backend, st.ID) }
