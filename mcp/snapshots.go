package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/sandbox"
)

func (s *Server) addSnapshotTools() {
	s.add(&sdk.Tool{Name: "snapshot_save", Description: "Save a sandbox's workspace (not its processes) as a snapshot, and return the snapshot_id to restore it later with snapshot_restore.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + sessionIDProp + `}, "additionalProperties": false}`)}, s.snapshotSave)
	s.add(&sdk.Tool{Name: "snapshot_restore", Description: "Create a new sandbox whose workspace is a snapshot you saved (snapshot_save), under the same ceiling as sandbox_create. Returns the new session_id; other sandboxes are left as they are.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "snapshot_id": {"type": "string", "description": "The snapshot_id snapshot_save returned."},
    "network": {"description": "\"none\", or a list of hosts the operator allows.", "anyOf": [{"type": "string", "enum": ["none"]}, {"type": "array", "items": {"type": "string"}}]},
    "memory": {"type": "string"},
    "timeout_seconds": {"type": "integer"}
  },
  "required": ["snapshot_id"],
  "additionalProperties": false
}`)}, s.snapshotRestore)
}

func (s *Server) snapshotSave(ctx context.Context, c *call) (string, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := c.decode(&a); err != nil {
		return "", err
	}
	b, err := c.session(ctx, a.SessionID, false)
	if err != nil {
		return "", fmt.Errorf("snapshot_save: %w", err)
	}
	ref, err := b.sess.Snapshot(ctx)
	if err != nil {
		return "", fmt.Errorf("snapshot_save %s: %w", b.id, err)
	}
	c.owner.saved(ref)
	return "snapshot_id: " + ref, nil
}

func (s *Server) snapshotRestore(ctx context.Context, c *call) (string, error) {
	var a struct {
		SnapshotID     string          `json:"snapshot_id"`
		Network        json.RawMessage `json:"network"`
		Memory         string          `json:"memory"`
		TimeoutSeconds int64           `json:"timeout_seconds"`
	}
	if err := c.decode(&a); err != nil {
		return "", err
	}
	// Threat: the store holds every client's snapshots (and the
	// operator's); a client restores only what it saved itself.
	if !c.owner.hasSaved(a.SnapshotID) {
		return "", sandbox.Errorf(sandbox.ErrNotFound, "snapshot_restore: %q is not a snapshot you saved in this connection (snapshot_save returns one)", a.SnapshotID)
	}
	req, err := createArgs{Network: a.Network, Memory: a.Memory, TimeoutSeconds: a.TimeoutSeconds}.request()
	if err != nil {
		return "", fmt.Errorf("snapshot_restore: %w", err)
	}
	req.Snapshot = a.SnapshotID
	b, err := s.create(ctx, c.owner, req)
	if err != nil {
		return "", fmt.Errorf("snapshot_restore: %w", err)
	}
	c.bind(b)
	return fmt.Sprintf("session_id: %s (restored from snapshot %s)\n%s", b.id, a.SnapshotID, b.describe()), nil
}

func (o *owner) saved(ref string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !slices.Contains(o.snapshots, ref) {
		o.snapshots = append(o.snapshots, ref)
	}
}

func (o *owner) hasSaved(ref string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return ref != "" && slices.Contains(o.snapshots, ref)
}
