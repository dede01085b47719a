package sandbox

import (
	"encoding/json"
	"fmt"
	"time"
)

// StateVersion is the version of the State format written by this code.
// Version 1 (the first release) had Handles as an object of strings;
// version 2 lets each backend put its own typed part there. Both are read.
const StateVersion = 2

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
	// Handles is the backend's own part (a control socket and init pid, a
	// container id), in the backend's format for this Version; only the
	// backend named reads it.
	Handles   json.RawMessage `json:"handles,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

// MarshalState encodes st as indented JSON.
func MarshalState(st State) ([]byte, error) {
	return json.MarshalIndent(st, "", "  ")
}

// UnmarshalState decodes a State of a version this code reads.
func UnmarshalState(data []byte) (State, error) {
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, Errorf(ErrInvalid, "session state: %w", err)
	}
	if st.Version < 1 || st.Version > StateVersion {
		return State{}, Errorf(ErrInvalid, "session state: version %d, this agentbox reads 1 to %d", st.Version, StateVersion)
	}
	if st.Backend == "" || st.ID == "" {
		return State{}, Errorf(ErrInvalid, "session state: backend and id are required")
	}
	return st, nil
}

// DecodeHandles reads st's Handles into v, the backend's typed part. A
// version 1 state's handles (all strings) are given to legacy, which
// fills v from them; legacy may be nil when the backend had none.
func DecodeHandles(st State, v any, legacy func(map[string]string) error) error {
	if len(st.Handles) == 0 || string(st.Handles) == "null" {
		return nil
	}
	if st.Version == 1 {
		var old map[string]string
		if err := json.Unmarshal(st.Handles, &old); err != nil {
			return Errorf(ErrInvalid, "session state %s: version 1 handles: %w", st, err)
		}
		if legacy == nil {
			return nil
		}
		if err := legacy(old); err != nil {
			return Errorf(ErrInvalid, "session state %s: version 1 handles: %w", st, err)
		}
		return nil
	}
	if err := json.Unmarshal(st.Handles, v); err != nil {
		return Errorf(ErrInvalid, "session state %s: handles: %w", st, err)
	}
	return nil
}

// EncodeHandles is v, the backend's typed part, for State.Handles.
func EncodeHandles(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// A backend's handles are plain data: this is a programming error.
		panic(fmt.Sprintf("sandbox: encode handles: %v", err))
	}
	return b
}

// String is a short description for logs.
func (st State) String() string { return fmt.Sprintf("%s/%s", st.Backend, st.ID) }
