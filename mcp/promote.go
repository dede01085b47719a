package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/artifact"
)

// Promotion is where the operator lets checked outputs leave a sandbox.
type Promotion struct {
	// Rules are the operator's artifact rules; nothing else leaves.
	Rules *artifact.Rules
	// To is the host directory under which each promotion gets a
	// directory of its own (session id and time), so no client writes
	// over another's outputs.
	To string
}

func (s *Server) addPromote() {
	if s.opts.Promotion == nil {
		return // the operator lets nothing out: the tool is not offered
	}
	s.add(&sdk.Tool{Name: "promote", Description: "Hand a sandbox's outputs to the operator: the files the operator's rules name are checked (types by content, sizes, schemas, validation commands in a fresh sandbox) and copied out with a provenance record only if every rule passes; otherwise nothing leaves and the violations are listed.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + sessionIDProp + `}, "additionalProperties": false}`)}, s.promote)
}

func (s *Server) promote(ctx context.Context, c *call) (string, error) {
	var a struct {
		SessionID string `json:"session_id"`
	}
	if err := c.decode(&a); err != nil {
		return "", err
	}
	b, err := c.session(ctx, a.SessionID, false)
	if err != nil {
		return "", fmt.Errorf("promote: %w", err)
	}
	p := s.opts.Promotion
	dest := filepath.Join(p.To, b.id+"-"+time.Now().UTC().Format("20060102T150405.000"))
	opts := artifact.PromoteOptions{NewSession: artifact.FreshSessionLike(s.opts.Client, b.sess)}
	if b.trace != nil {
		opts.RunID, opts.TraceID = b.trace.RunID(), b.trace.TraceID()
	}
	rec, err := artifact.Promote(ctx, artifact.NewSessionSource(b.sess), p.Rules, dest, opts)
	if err != nil {
		return "", fmt.Errorf("promote %s: %w", b.id, err)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "promoted %d file(s) of %s, with %s:\n", len(rec.Files), b.id, artifact.RecordName)
	for _, f := range rec.Files {
		fmt.Fprintf(&out, "  %s (%d bytes, %s, sha256 %s)\n", f.Path, f.Size, f.Type, f.SHA256[:12])
	}
	return strings.TrimRight(out.String(), "\n"), nil
}
