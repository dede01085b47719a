package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/manifest"
	"github.com/agentbox/agentbox/sandbox"
)

// remoteClient is the local backend posing as one whose workspaces are
// not on this host (as sandbox/kube's are not).
type remoteClient struct{ *countingClient }

func (remoteClient) RemoteWorkspaces() bool { return true }

func TestAManifestReachesASessionWhoseWorkspaceIsNotOnThisHost(t *testing.T) {
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "tool.sh"), []byte("echo tool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.ParseYAML([]byte(`entries:
  data/in.csv: {file: {content: "a,1\n"}}
  bin/tool.sh: {local_file: {src: tool.sh}}
  output: {dir: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := remoteClient{newClient(t)}
	ctx := context.Background()
	o, err := openSession(ctx, &SandboxAgent{Manifest: m}, RunConfig{Sandbox: SandboxConfig{Client: c, ManifestBase: base, TrustedManifest: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		o.sess.Close(ctx)
		o.removeTemp()
	}()
	if ws := o.sess.State().Spec.Workspace; ws != "" {
		t.Errorf("the session was given the host directory %s as its workspace", ws)
	}
	if b, err := o.sess.ReadFile(ctx, "data/in.csv"); err != nil || string(b) != "a,1\n" {
		t.Errorf("data/in.csv in the session: %q, %v", b, err)
	}
	res, err := sandbox.Exec(ctx, o.sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "./bin/tool.sh && test -d output && echo dir"}})
	if err != nil || string(res.Stdout) != "tool\ndir\n" {
		t.Errorf("the copied script and the empty directory: %q %q, %v", res.Stdout, res.Stderr, err)
	}
	if len(o.inputs) != 2 {
		t.Errorf("inputs %+v, want the two files recorded", o.inputs)
	}
}

func TestCopyingALinkIntoASessionIsRefusedNamingIt(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	c := newClient(t)
	s, err := c.Create(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	err = copyTree(context.Background(), s, dir)
	if err == nil || !strings.Contains(err.Error(), "link") {
		t.Fatalf("copyTree = %v, want a refusal naming the link", err)
	}
}
