package mcp

import (
	"context"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxResourceBytes bounds a workspace file read as a resource.
const maxResourceBytes = 8 << 20

const (
	workspaceScheme = "agentbox://session/"
	traceScheme     = "agentbox://trace/"
)

func (s *Server) addResources() {
	s.sdk.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "workspace-file",
		Title:       "A file in a sandbox's workspace",
		URITemplate: workspaceScheme + "{session_id}/{+path}",
		Description: "A file of one of your sandboxes, by its path relative to /workspace.",
	}, s.readWorkspaceFile)
	s.sdk.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "session-trace",
		Title:       "A sandbox's trace",
		URITemplate: traceScheme + "{session_id}",
		Description: "The JSONL record of every tool call on one of your sandboxes.",
		MIMEType:    "application/jsonl",
	}, s.readTrace)
}

// resourceBox is the caller's own session a resource URI names; another
// client's session is as not found as one that never existed.
func (s *Server) resourceBox(req *sdk.ReadResourceRequest, id string) (*box, error) {
	o, err := s.ownerOf(req.Session)
	if err != nil {
		return nil, err
	}
	b, err := o.get(id)
	if err != nil || b == nil {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	return b, nil
}

func (s *Server) readWorkspaceFile(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	id, p, ok := strings.Cut(strings.TrimPrefix(uri, workspaceScheme), "/")
	if !ok || id == "" || p == "" {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	b, err := s.resourceBox(req, id)
	if err != nil {
		return nil, err
	}
	// Size first, so that a huge file is refused before it is read.
	entries, err := b.sess.ListDir(ctx, path.Dir(p))
	if err != nil {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	found := false
	for _, e := range entries {
		if e.Name == path.Base(p) {
			if e.IsDir || e.Size > maxResourceBytes {
				return nil, sdk.ResourceNotFoundError(uri) // a directory, or too large: list_dir and exec are the tools for those
			}
			found = true
		}
	}
	if !found {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	data, err := b.sess.ReadFile(ctx, p)
	if err != nil {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	rc := &sdk.ResourceContents{URI: uri}
	if utf8.Valid(data) {
		rc.Text, rc.MIMEType = string(data), "text/plain"
	} else {
		rc.Blob, rc.MIMEType = data, "application/octet-stream"
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
}

func (s *Server) readTrace(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	b, err := s.resourceBox(req, strings.TrimPrefix(uri, traceScheme))
	if err != nil {
		return nil, err
	}
	if b.tracePath == "" {
		return nil, sdk.ResourceNotFoundError(uri) // the operator keeps no traces (--trace-dir "")
	}
	data, err := os.ReadFile(b.tracePath)
	if err != nil {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/jsonl", Text: string(data)}}}, nil
}
