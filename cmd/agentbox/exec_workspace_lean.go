//go:build lean

package main

import (
	"context"
	"errors"

	"github.com/agentbox/agentbox/sandbox"
)

// The lean build runs the plain exec, the one an agent's every command
// pays the start-up of: no manifest, no snapshot, no egress proxy. Those
// link the YAML, compression and HTTP stacks, whose code every start of
// the program would map and fault in; an exec that needs one hands off
// to agentbox-full (see fullOnly).

// workspaceFlags are the workspace-contract flags of `exec`, registered
// here too so that the lean build recognises them and hands off.
type workspaceFlags struct {
	manifest     string
	snapshot     string
	saveSnapshot bool
	store        string
}

// fullOnly names what of an exec the lean build does not link, "" when it
// can run it.
func (w *workspaceFlags) fullOnly(spec sandbox.Spec) string {
	switch {
	case w.manifest != "":
		return "--manifest"
	case w.snapshot != "":
		return "--snapshot"
	case w.saveSnapshot:
		return "--save-snapshot"
	case spec.Policy.Network.EffectiveMode() == sandbox.NetworkAllowList:
		return "--network (allow-list)"
	}
	return ""
}

// preparedWorkspace is a workspace ready for Create, and how to undo it.
type preparedWorkspace struct {
	store   sandbox.SnapshotStore
	cleanup func()
}

// makesFiles is false: prepare makes nothing in the lean build.
func (w *workspaceFlags) makesFiles() bool { return false }

// prepare has nothing to prepare in the lean build: what would need it
// was handed off (fullOnly).
func (w *workspaceFlags) prepare(_ context.Context, spec *sandbox.Spec, _ bool) (*preparedWorkspace, error) {
	if what := w.fullOnly(*spec); what != "" {
		return nil, errors.New("exec " + what + " needs agentbox-full")
	}
	return &preparedWorkspace{cleanup: func() {}}, nil
}
