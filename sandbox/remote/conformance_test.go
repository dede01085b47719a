package remote_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/sandbox/remote"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
	"github.com/agentbox/agentbox/server"
	"github.com/agentbox/agentbox/snapshot"
)

// served is a server on a unix socket and a key of one tenant.
type served struct {
	srv    *server.Server
	sock   string
	data   string
	tenant string
	token  string
}

// serve starts a server on backend b whose tenant may name host paths
// under the system's temporary directory (where the suite makes its
// workspaces); everything stops when the test ends.
func serve(t *testing.T, b server.NewBackend) *served {
	t.Helper()
	data := t.TempDir()
	cfg := server.Config{Defaults: server.Limits{HostBase: os.TempDir(), Sessions: 1000}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := server.New(context.Background(), server.Options{Data: data, Backend: b, Config: cfg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := server.Listen(server.ListenOptions{Addr: "unix:" + sock})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler()}
	go func() { _ = hs.Serve(ln) }()
	_, tok, err := s.Registry().CreateKey("conformance")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = hs.Shutdown(ctx)
		if err := s.Close(ctx, true); err != nil {
			t.Errorf("close the server: %v", err)
		}
	})
	return &served{srv: s, sock: sock, data: data, tenant: "conformance", token: tok}
}

// client is a remote client of the served tenant.
func (sv *served) client(t testing.TB) *remote.Client {
	t.Helper()
	c, err := remote.New(context.Background(), remote.Options{Server: "unix:" + sv.sock, Token: sv.token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// store is the tenant's snapshot store on the server (the suite only
// needs to know there is one).
func (sv *served) store(t *testing.T) sandbox.SnapshotStore {
	st, err := snapshot.Open(filepath.Join(sv.data, "tenants", sv.tenant, "snapshots"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func linuxBackend(t *testing.T) server.NewBackend {
	testenv.NeedRoot(t, "the linux backend behind the server")
	state := t.TempDir()
	if _, err := linux.New(linux.Options{StateDir: state}); err != nil {
		testenv.Skipf(t, "linux backend unavailable: %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return func(_ string, store sandbox.SnapshotStore) (sandbox.Client, error) {
		return linux.New(linux.Options{StateDir: state, Snapshots: store, Logger: log})
	}
}

func TestConformanceOverTheLinuxBackend(t *testing.T) {
	sv := serve(t, linuxBackend(t))
	sandboxtest.Run(t, func(t *testing.T) sandbox.Client { return sv.client(t) },
		sandboxtest.WithSnapshots(sv.store(t)),
		sandboxtest.NoWatch("the server has no watch route"))
}

func dockerBackend(t *testing.T) server.NewBackend {
	c, err := docker.New(docker.Options{})
	testenv.NeedDocker(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.BuildBaseImage(ctx, docker.BuildOptions{}); err != nil {
		t.Fatalf("build the base image: %v", err)
	}
	c.Close()
	return func(_ string, store sandbox.SnapshotStore) (sandbox.Client, error) {
		return docker.New(docker.Options{Snapshots: store})
	}
}

func TestConformanceOverTheDockerBackend(t *testing.T) {
	sv := serve(t, dockerBackend(t))
	sandboxtest.Run(t, func(t *testing.T) sandbox.Client { return sv.client(t) },
		sandboxtest.WithSnapshots(sv.store(t)),
		sandboxtest.NoWatch("the server has no watch route"))
}
