package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestStateRoundTrip(t *testing.T) {
	st := State{
		Version: StateVersion,
		Backend: "linux",
		ID:      "abc123",
		Spec: Spec{
			Workspace: "/srv/ws",
			Env:       map[string]string{"A": "1"},
			User:      "1000:1000",
			Mounts:    []Mount{{Source: "/data", Target: "/mnt/data", ReadOnly: true}},
			Policy: Policy{
				Network:   NetworkPolicy{Mode: NetworkAllowList, Allow: []string{"api.example.com"}},
				Resources: Resources{MemoryBytes: 512 << 20, ExecTimeout: 30 * time.Second},
			},
			Labels: map[string]string{"run": "r1"},
		},
		Workspace:     "/srv/ws",
		OwnsWorkspace: true,
		Snapshot:      "sha256:feed",
		Handles:       json.RawMessage(`{"init_pid":4242}`),
		CreatedAt:     time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	data, err := MarshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalState(data)
	if err != nil {
		t.Fatal(err)
	}
	if compactJSON(t, back.Handles) != compactJSON(t, st.Handles) {
		t.Fatalf("round trip changed the handles: %s, want %s", back.Handles, st.Handles)
	}
	back.Handles = st.Handles // indented by MarshalState, the same JSON
	if !reflect.DeepEqual(back, st) {
		t.Fatalf("round trip changed the state:\n got %+v\nwant %+v", back, st)
	}
	if st.String() != "linux/abc123" {
		t.Fatalf("String() = %q", st.String())
	}
}

func TestStateNeverCarriesCredentials(t *testing.T) {
	st := State{Version: StateVersion, Backend: "linux", ID: "x"}
	st.Spec.Policy.Network = NetworkPolicy{
		Mode:        NetworkAllowList,
		Allow:       []string{"api.example.com"},
		Credentials: map[string]map[string]string{"api.example.com": {"Authorization": "Bearer s3cr3t-token"}},
	}
	data, err := MarshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cr3t-token") || strings.Contains(string(data), "Authorization") {
		t.Fatalf("the serialized state carries a credential:\n%s", data)
	}
}

func TestUnmarshalStateRefusals(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantMsg string
	}{
		{"malformed JSON is refused", `{"version":`, "session state"},
		{"a future version is refused", `{"version":3,"backend":"linux","id":"x"}`, "version 3"},
		{"a missing version is refused", `{"backend":"linux","id":"x"}`, "version 0"},
		{"a missing backend is refused", `{"version":1,"id":"x"}`, "backend and id are required"},
		{"a missing id is refused", `{"version":1,"backend":"linux"}`, "backend and id are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := UnmarshalState([]byte(tt.data))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tt.wantMsg)
			}
		})
	}
}

// handles is a backend's typed part, as a test of DecodeHandles.
type handles struct {
	Socket  string `json:"socket"`
	InitPID int    `json:"init_pid"`
}

func TestDecodeHandlesReadsBothVersions(t *testing.T) {
	tests := []struct {
		name string
		st   State
		want handles
	}{
		{"a version 2 state's typed handles are read as they are",
			State{Version: 2, Backend: "b", ID: "x", Handles: json.RawMessage(`{"socket":"/s","init_pid":7}`)}, handles{"/s", 7}},
		{"a version 1 state's string handles go through the legacy reader",
			State{Version: 1, Backend: "b", ID: "x", Handles: json.RawMessage(`{"socket":"/s","init_pid":"7"}`)}, handles{"/s", 7}},
		{"a state without handles leaves them zero",
			State{Version: 2, Backend: "b", ID: "x"}, handles{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got handles
			err := DecodeHandles(tt.st, &got, func(old map[string]string) error {
				got.Socket = old["socket"]
				_, err := fmt.Sscan(old["init_pid"], &got.InitPID)
				return err
			})
			if err != nil || got != tt.want {
				t.Fatalf("DecodeHandles = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestAVersionOneStateIsReadAndWrittenBackUnchanged(t *testing.T) {
	v1 := `{"version":1,"backend":"linux","id":"abc","spec":{"policy":{"network":{},"filesystem":{},"resources":{}}},"handles":{"init_pid":"4242","socket":"/run/x/control.sock"},"created_at":"2026-01-02T03:04:05Z"}`
	st, err := UnmarshalState([]byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != 1 || !strings.Contains(string(st.Handles), `"init_pid":"4242"`) {
		t.Fatalf("read %+v", st)
	}
	again, err := MarshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalState(again)
	if err != nil || back.Version != 1 || !reflect.DeepEqual(compactJSON(t, back.Handles), compactJSON(t, st.Handles)) {
		t.Fatalf("written back as %s", again)
	}
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
