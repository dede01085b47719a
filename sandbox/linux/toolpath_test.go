package linux

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

func TestThePathHoldsTheBinDirectoriesOfWhatIsBound(t *testing.T) {
	host := t.TempDir()
	for _, d := range []string{"usr/local/go/bin", "usr/local/bin", "usr/local/share/man", "tools/node/bin", "data"} {
		if err := os.MkdirAll(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(host, "usr/local/share/bin")); err != nil {
		t.Fatal(err)
	}
	mounts := []sandbox.Mount{
		{Source: filepath.Join(host, "tools/node"), Target: "/opt/node", ReadOnly: true},
		{Source: filepath.Join(host, "data"), Target: "/workspace/data", ReadOnly: true},
	}
	got := sandboxPath(host, mounts)
	want := standardPath + ":/usr/local/go/bin:/opt/node/bin"
	if got != want {
		t.Fatalf("PATH\n got %s\nwant %s\n(a toolchain under /usr/local and a mount's bin are added; a mount without bin, a bin that is a link, and a standard directory are not)", got, want)
	}
}

func TestTheGoToolchainOfTheHostIsOnThePath(t *testing.T) {
	if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
		testenv.Skipf(t, "no Go toolchain in /usr/local/go on this host")
	}
	s := newTestSession(t, newTestClient(t), sandbox.Spec{})
	res := run(t, s, "sh", "-c", "command -v go")
	if got := string(res.Stdout); got != "/usr/local/go/bin/go\n" {
		t.Fatalf("command -v go = %q (exit %d, %s); /usr/local/go is bound, so its bin belongs on PATH", got, res.ExitCode, res.Stderr)
	}
}
