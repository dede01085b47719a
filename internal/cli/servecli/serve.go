// Package servecli is agentbox serve, the sandbox service, and its token
// commands. It links the HTTP server and its registry, which only
// agentbox-full carries.
package servecli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/datadir"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server"
)

// Register links the serve command and the remote backend into a.
func Register(a *cli.App) {
	a.Add(Serve)
	a.AddBackend("remote", Remote, nil)
}

// defaultData is the server's data directory when --data is not given.
func defaultData() string { return filepath.Join(datadir.Dir(), "server") }

type serveFlags struct {
	listen      server.ListenOptions
	data        string
	backend     string
	image       string
	kube        cli.KubeOptions
	config      string
	closeOnExit bool
	grace       time.Duration
	metrics     string
}

// Serve is the serve command.
func Serve(a *cli.App) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve sandboxes over HTTP to tenants holding API keys",
		Long: `Serve sandboxes over an HTTP API (JSON, and a WebSocket for interactive
commands) to programs in any language, on this host or others. Tenants
authenticate with API keys (agentbox serve token create --tenant NAME) and
never see each other's sessions, files or snapshots. The server's schema
is at GET /v1/openapi.json.

By default it listens on the unix socket ` + server.DefaultSocket + `.
A TCP address needs --tls-cert and --tls-key, except on loopback; --insecure
allows plain TCP elsewhere (behind a proxy that terminates TLS).

Sessions outlive the server: on SIGTERM it stops accepting, lets running
requests finish within --grace and leaves the sessions for the next server,
which finds them again (--close-on-exit deletes them instead). State lives
in --data: the registry of keys, sessions and snapshots, and each tenant's
snapshot store.

Example:
  agentbox serve --listen 127.0.0.1:8080 &
  TOKEN=$(agentbox serve token create --tenant acme)
  curl -H "Authorization: Bearer $TOKEN" -X POST -d '{}' http://127.0.0.1:8080/v1/sessions`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), a, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen.Addr, "listen", "unix:"+server.DefaultSocket, "`ADDR`: unix:PATH, or HOST:PORT for TCP")
	fl.StringVar(&f.listen.CertFile, "tls-cert", "", "TLS certificate `FILE` (PEM) for a TCP address")
	fl.StringVar(&f.listen.KeyFile, "tls-key", "", "TLS private key `FILE` (PEM) for a TCP address")
	fl.BoolVar(&f.listen.Insecure, "insecure", false, "allow plain TCP on an address other than loopback (API keys travel in the clear)")
	fl.StringVar(&f.data, "data", defaultData(), "data `DIR`: the registry and the tenants' snapshots")
	fl.StringVar(&f.backend, "backend", "linux", "sandbox backend the sessions run on: linux, docker or kube")
	cli.RegisterKubeFlags(fl, &f.kube)
	fl.StringVar(&f.image, "image", "", "root filesystem image (docker backend)")
	fl.StringVar(&f.config, "config", "", "configuration `FILE` (YAML): per-tenant limits")
	fl.BoolVar(&f.closeOnExit, "close-on-exit", false, "delete every session when the server stops, instead of leaving them for the next server")
	fl.DurationVar(&f.grace, "grace", 30*time.Second, "how long running requests may take to finish at shutdown")
	fl.StringVar(&f.metrics, "metrics", "", "also serve Prometheus metrics at `ADDR`/metrics (HOST:PORT, loopback unless --insecure; always on the admin socket DATA/admin.sock); they name tenants")
	cmd.AddCommand(tokenCommand())
	return cmd
}

func serve(ctx context.Context, a *cli.App, f serveFlags) error {
	if f.backend == "remote" || f.backend == "local" {
		return cli.Failf("serve: --backend %s: the server serves confining backends only (linux, docker, kube)", f.backend)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	var cfg server.Config
	if f.config != "" {
		var err error
		if cfg, err = server.LoadConfig(f.config); err != nil {
			return cli.Fail(err)
		}
	}
	if f.listen.Insecure {
		log.Warn("--insecure: plain TCP; API keys and data travel in the clear unless a proxy in front terminates TLS")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := server.New(ctx, server.Options{
		Data: f.data, Config: cfg, Logger: log,
		Backend: func(tenant string, store sandbox.SnapshotStore) (sandbox.Client, error) {
			return a.OpenBackend(f.backend, cli.BackendOptions{Snapshots: store, Logger: log.With("tenant", tenant), Image: f.image, Kube: f.kube, Warn: os.Stderr})
		},
	})
	if err != nil {
		return cli.Fail(err)
	}
	ln, err := server.Listen(f.listen)
	if err != nil {
		_ = s.Close(context.Background(), false)
		return cli.Fail(err)
	}
	admin, err := server.Listen(server.ListenOptions{Addr: "unix:" + server.AdminSocket(f.data)})
	if err != nil {
		ln.Close()
		_ = s.Close(context.Background(), false)
		return cli.Fail(err)
	}
	if err := os.Chmod(server.AdminSocket(f.data), 0o600); err != nil {
		return cli.Fail(err)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	amux := http.NewServeMux()
	amux.Handle("/", server.AdminHandler(s.Registry()))
	amux.Handle("GET /metrics", s.MetricsHandler())
	as := &http.Server{Handler: amux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 3)
	go func() { errc <- hs.Serve(ln) }()
	go func() { errc <- as.Serve(admin) }()
	if f.metrics != "" {
		mln, err := server.Listen(server.ListenOptions{Addr: f.metrics})
		if err != nil {
			return cli.Fail(fmt.Errorf("--metrics: %w", err))
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.MetricsHandler())
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- ms.Serve(mln) }()
		defer ms.Close()
	}
	go s.Reaper(ctx, 10*time.Second)
	log.Info("serving", "listen", ln.Addr().String(), "backend", f.backend, "data", f.data)

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "grace", f.grace.String(), "close_sessions", f.closeOnExit)
	case serveErr = <-errc:
	}
	gctx, cancel := context.WithTimeout(context.Background(), f.grace)
	defer cancel()
	_ = as.Shutdown(gctx)
	if err := hs.Shutdown(gctx); err != nil {
		log.Warn("requests still running at the end of the grace period", "err", err)
	}
	s.Drain(gctx)
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	if err := s.Close(cctx, f.closeOnExit); err != nil {
		return cli.Fail(err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return cli.Fail(fmt.Errorf("serve: %w", serveErr))
	}
	return nil
}
