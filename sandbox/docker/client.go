package docker

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/sandbox/egress"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agentbox/agentbox/sandbox"
)

// Name is the backend's name in State and on the command line.
const Name = "docker"

// Options configure a Client.
type Options struct {
	// Snapshots stores workspace snapshots; nil disables Session.Snapshot
	// and resuming from a snapshot.
	Snapshots sandbox.SnapshotStore
	// Logger receives warnings (weakened policy parts) and debug events.
	Logger *slog.Logger
	// Image is the default image when a Spec names none; default BaseImage.
	Image string
	// Host overrides DOCKER_HOST (for example "unix:///run/docker.sock").
	Host string
	// EgressUpstream replaces how session proxies reach and verify
	// upstreams; for tests that play a remote HTTPS host on loopback.
	EgressUpstream egress.Upstream
}

// Client is the Docker backend: each session is one container on the
// Docker Engine that DOCKER_HOST names (the local socket by default).
type Client struct {
	api    *client.Client
	opts   Options
	log    *slog.Logger
	host   string
	engine engineInfo
}

// engineInfo is what New learned about the engine, for Enforces.
type engineInfo struct {
	version       string
	apiVersion    string
	storageDriver string
	arch          string // GOARCH of the engine's containers
	seccomp       bool
	rootless      bool
	usernsRemap   bool // the daemon maps every container onto a subordinate id range
	cgroupVersion string
	memoryLimit   bool
	swapLimit     bool
	pidsLimit     bool
	cpuCFS        bool
	cpuShares     bool
	internalNet   bool // bridge driver present, so an --internal network can be made
	local         bool // the engine listens on a unix socket of this host
}

// New connects to the Docker Engine (DOCKER_HOST, or Options.Host),
// negotiates the API version and detects what the engine can enforce. An
// engine that does not answer is ErrUnavailable naming the host.
func New(opts Options) (*Client, error) {
	if opts.Image == "" {
		opts.Image = BaseImage
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clientOpts := []client.Opt{client.FromEnv}
	if opts.Host != "" {
		clientOpts = append(clientOpts, client.WithHost(opts.Host))
	}
	api, err := client.New(clientOpts...)
	if err != nil {
		return nil, sandbox.Wrap("docker: connect", sandbox.ErrUnavailable, fmt.Errorf("docker client for %s: %w", hostDescription(opts.Host), err))
	}
	c := &Client{api: api, opts: opts, log: log, host: hostDescription(opts.Host)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.detect(ctx); err != nil {
		_ = api.Close()
		return nil, err
	}
	return c, nil
}

// hostDescription names the engine address for error messages, and where
// it came from.
func hostDescription(override string) string {
	switch {
	case override != "":
		return override
	case os.Getenv("DOCKER_HOST") != "":
		return os.Getenv("DOCKER_HOST") + " (from DOCKER_HOST)"
	}
	return client.DefaultDockerHost + " (DOCKER_HOST is unset)"
}

// engineCache keeps what detect learned per engine address for a short
// while: the info call costs tens of milliseconds, and callers (tests, the
// server) build many clients of one engine.
var engineCache struct {
	sync.Mutex
	m map[string]cachedEngine
}

type cachedEngine struct {
	info engineInfo
	at   time.Time
}

const engineCacheTTL = 30 * time.Second

func (c *Client) detect(ctx context.Context) error {
	ping, err := c.api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		return c.unavailable("docker: connect", err)
	}
	key := c.api.DaemonHost() + " " + ping.APIVersion
	engineCache.Lock()
	ce, ok := engineCache.m[key]
	engineCache.Unlock()
	if ok && time.Since(ce.at) < engineCacheTTL {
		c.engine = ce.info
		return nil
	}
	res, err := c.api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return c.unavailable("docker: engine info", err)
	}
	info := res.Info
	if info.OSType != "" && info.OSType != "linux" {
		return sandbox.Errorf(sandbox.ErrUnavailable, "docker: engine at %s runs %s containers; agentbox needs linux", c.host, info.OSType)
	}
	e := engineInfo{
		version:       info.ServerVersion,
		apiVersion:    ping.APIVersion,
		storageDriver: info.Driver,
		arch:          engineGOARCH(info.Architecture),
		cgroupVersion: info.CgroupVersion,
		memoryLimit:   info.MemoryLimit,
		swapLimit:     info.SwapLimit,
		pidsLimit:     info.PidsLimit,
		cpuCFS:        info.CPUCfsQuota,
		cpuShares:     info.CPUShares,
	}
	for _, o := range info.SecurityOptions {
		switch {
		case strings.HasPrefix(o, "name=seccomp"):
			e.seccomp = true
		case strings.HasPrefix(o, "name=rootless"):
			e.rootless = true
		case strings.HasPrefix(o, "name=userns"):
			e.usernsRemap = true
		}
	}
	e.internalNet = slices.Contains(info.Plugins.Network, "bridge")
	e.local = strings.HasPrefix(c.api.DaemonHost(), "unix://")
	c.engine = e
	engineCache.Lock()
	if engineCache.m == nil {
		engineCache.m = map[string]cachedEngine{}
	}
	engineCache.m[key] = cachedEngine{info: e, at: time.Now()}
	engineCache.Unlock()
	c.log.Debug("docker engine", "host", c.host, "version", e.version, "api", c.api.ClientVersion(), "storage", e.storageDriver, "seccomp", e.seccomp)
	return nil
}

// remapsIDs says how the engine maps container ids onto other host ids,
// "" when it does not: a uid inside is then not that uid on the host,
// and the ownership rule (owner.go) cannot hold.
func (c *Client) remapsIDs() string {
	switch {
	case c.engine.rootless:
		return "runs rootless, so container ids are its user's subordinate ids"
	case c.engine.usernsRemap:
		return "runs with userns-remap, so container ids are a subordinate range"
	}
	return ""
}

// unavailable turns a transport error into ErrUnavailable naming the host;
// other errors are wrapped as they are.
func (c *Client) unavailable(op string, err error) error {
	if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) || isConnRefused(err) {
		return &sandbox.Error{Op: op, Kind: sandbox.ErrUnavailable, Err: fmt.Errorf("docker engine at %s does not answer (is dockerd running, and is DOCKER_HOST right?): %w", c.host, err), Retryable: true}
	}
	return sandbox.Wrap(op, kindOf(err), err)
}

func isConnRefused(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "no such file or directory") && strings.Contains(s, "dial")
}

// kindOf maps engine error classes to sandbox kinds.
func kindOf(err error) error {
	switch {
	case cerrdefs.IsNotFound(err):
		return sandbox.ErrNotFound
	case cerrdefs.IsInvalidArgument(err):
		return sandbox.ErrInvalid
	case client.IsErrConnectionFailed(err):
		return sandbox.ErrUnavailable
	}
	return nil
}

// Name is "docker".
func (c *Client) Name() string { return Name }

// Engine describes the engine New connected to, for logs and doctor output.
func (c *Client) Engine() string {
	return fmt.Sprintf("docker %s (API %s) at %s, storage %s, cgroup v%s", c.engine.version, c.api.ClientVersion(), c.host, c.engine.storageDriver, c.engine.cgroupVersion)
}

// Enforces lists the parts this engine can enforce, as detected by New.
//
// Always (the container model): filesystem isolation (the image root,
// read-only, plus the workspace bind), read-only paths (read-only binds),
// deny paths (an empty read-only tmpfs or /dev/null over the path), process
// isolation (a pid namespace), network none (network mode none), the
// timeout and output caps (enforced by agentbox, killing the exec's tree).
// Identity needs the engine's seccomp support; memory, pids and cpu need
// the matching cgroup controllers; disk needs root, which mounts the
// tmpfs of a workspace the backend makes (a user's directory cannot be
// bounded and is refused).
func (c *Client) Enforces() []sandbox.Part {
	parts := []sandbox.Part{
		sandbox.PartFilesystem, sandbox.PartReadOnlyPaths, sandbox.PartDenyPaths,
		sandbox.PartNetworkNone, sandbox.PartProcesses, sandbox.PartTimeout, sandbox.PartOutput,
	}
	e := c.engine
	if _, err := c.seccompProfile(); err == nil && e.seccomp {
		parts = append(parts, sandbox.PartIdentity)
	}
	if e.memoryLimit && e.swapLimit {
		parts = append(parts, sandbox.PartMemory)
	}
	if e.pidsLimit {
		parts = append(parts, sandbox.PartPids)
	}
	if e.cpuCFS {
		parts = append(parts, sandbox.PartCPU)
	}
	if c.egressSupport() == "" {
		parts = append(parts, sandbox.PartNetworkAllowList, sandbox.PartNetworkInspect)
	}
	if canBound() {
		// A workspace the backend makes is a tmpfs of the asked size
		// (workspace.go); a directory of the user's is refused by name.
		parts = append(parts, sandbox.PartDisk)
	}
	return parts
}

// Close releases the engine connection.
func (c *Client) Close() error { return c.api.Close() }
