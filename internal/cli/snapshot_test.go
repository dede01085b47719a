package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/snapshot"
)

// runSnapshotCmd runs `agentbox snapshot ARGS...` in-process.
func runSnapshotCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := Snapshot(New())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

func TestSnapshotCommandsSaveListShowAndRestore(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha"), 0o640)
	os.MkdirAll(filepath.Join(ws, "mnt", "data"), 0o755)
	os.WriteFile(filepath.Join(ws, "mnt", "data", "big"), []byte("mounted"), 0o644)

	out, err := runSnapshotCmd(t, "save", "--store", store, "--exclude", "mnt/data", "--label", "run=7", ws)
	if err != nil {
		t.Fatalf("save: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out)

	out, err = runSnapshotCmd(t, "ls", "--store", store, "--json")
	var list []snapshot.Info
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].ID != id || list[0].Labels["run"] != "7" {
		t.Fatalf("ls --json = %s, %v", out, err)
	}
	if out, err = runSnapshotCmd(t, "show", "--store", store, id[:8], "--entries"); err != nil || !strings.Contains(out, "a.txt") || strings.Contains(out, "big") {
		t.Fatalf("show --entries = %s, %v", out, err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if out, err = runSnapshotCmd(t, "restore", "--store", store, id[:8], dst); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(filepath.Join(dst, "a.txt")); err != nil || string(data) != "alpha" {
		t.Fatalf("restored a.txt = %q, %v", data, err)
	}
	if out, err = runSnapshotCmd(t, "rm", "--store", store, id[:8]); err != nil {
		t.Fatalf("rm: %v\n%s", err, out)
	}
}

func TestSnapshotCommandsFailWithStatus125AndAClearMessage(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"restoring an unknown ID", []string{"restore", "--store", store, "1a2b", t.TempDir()}, "snapshot 1a2b not found in " + store + " (agentbox snapshot ls lists them)"},
		{"showing an unknown ID", []string{"show", "--store", store, "1a2b"}, "not found"},
		{"removing an unknown ID", []string{"rm", "--store", store, "1a2b"}, "not found"},
		{"saving a directory that does not exist", []string{"save", "--store", store, "/nonexistent/ws"}, "/nonexistent/ws"},
		{"a malformed label", []string{"save", "--store", store, "--label", "novalue", t.TempDir()}, "KEY=VALUE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runSnapshotCmd(t, tt.args...)
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != ExitFailure {
				t.Fatalf("err = %v, want an exit status %d", err, ExitFailure)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}
