package sandbox

import (
	"errors"
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
		Handles:       map[string]string{"init_pid": "4242"},
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
		{"a future version is refused", `{"version":2,"backend":"linux","id":"x"}`, "version 2"},
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
