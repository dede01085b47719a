// Command srvbench measures agentbox serve against the library in one
// run, on the native backend, the two sides interleaved round by round so
// that load drifts hit both alike:
//
//   - exec of `true` in a live session: Session.Exec in-process against
//     the same through the remote backend (a server on a unix socket, and
//     on TCP loopback);
//   - session create (and close): linux.Client.Create against the remote
//     backend's Create;
//   - session acquire from a warm pool: pool.Pool.Create in-process against
//     the remote backend's Create of a tenant whose config keeps a pool
//     (over TCP loopback), each round once the pools are full again;
//   - concurrency: C clients each running N execs through the server, in
//     sessions of their own: failures, throughput, p50 and p99;
//   - the server's own memory per idle session (Go heap, the sandbox's
//     own memory being the backend's figure).
//
// It prints a Markdown table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
	"github.com/agentbox/agentbox/sandbox/pool"
	"github.com/agentbox/agentbox/sandbox/remote"
	"github.com/agentbox/agentbox/server"
)

func main() {
	execN := flag.Int("exec", 300, "exec rounds (each: one in-process, one per transport)")
	createN := flag.Int("create", 30, "create rounds")
	acquireN := flag.Int("acquire", 50, "acquire rounds from a warm pool")
	clients := flag.Int("clients", 200, "concurrent clients")
	perClient := flag.Int("per-client", 50, "execs per concurrent client")
	idleN := flag.Int("idle", 50, "idle sessions for the memory figure")
	flag.Parse()
	if err := run(*execN, *createN, *acquireN, *clients, *perClient, *idleN); err != nil {
		fmt.Fprintln(os.Stderr, "srvbench:", err)
		os.Exit(1)
	}
}

type series struct{ d []time.Duration }

func (s *series) add(d time.Duration) { s.d = append(s.d, d) }

func (s *series) pct(p float64) time.Duration {
	d := slices.Clone(s.d)
	slices.Sort(d)
	if len(d) == 0 {
		return 0
	}
	return d[int(p*float64(len(d)-1)+0.5)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

// diff is b-a, signed.
func diff(a, b time.Duration) string {
	return fmt.Sprintf("%+.3f ms", float64((b-a).Microseconds())/1000)
}

func run(execN, createN, acquireN, clients, perClient, idleN int) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "srvbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	state := filepath.Join(tmp, "state")
	lib, err := linux.New(linux.Options{StateDir: state, Logger: quiet})
	if err != nil {
		return fmt.Errorf("the linux backend: %w", err)
	}
	cfg := server.Config{Defaults: server.Limits{Sessions: clients + idleN + 16, SessionMemory: 256 << 20},
		Tenants: map[string]server.Limits{"pooled": {Pool: poolSize}}}
	srv, err := server.New(ctx, server.Options{Data: filepath.Join(tmp, "data"), Config: cfg, Logger: quiet,
		Backend: func(_ string, store sandbox.SnapshotStore) (sandbox.Client, error) {
			return linux.New(linux.Options{StateDir: state, Snapshots: store, Logger: quiet})
		}})
	if err != nil {
		return err
	}
	defer srv.Close(context.Background(), true)
	sock := filepath.Join(tmp, "s.sock")
	uln, err := server.Listen(server.ListenOptions{Addr: "unix:" + sock})
	if err != nil {
		return err
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler()}
	go func() { _ = hs.Serve(uln) }()
	go func() { _ = hs.Serve(tln) }()
	defer hs.Close()
	_, tok, err := srv.Registry().CreateKey("bench")
	if err != nil {
		return err
	}
	overUnix, err := remote.New(ctx, remote.Options{Server: "unix:" + sock, Token: tok})
	if err != nil {
		return err
	}
	overTCP, err := remote.New(ctx, remote.Options{Server: "http://" + tln.Addr().String(), Token: tok})
	if err != nil {
		return err
	}
	_, ptok, err := srv.Registry().CreateKey("pooled")
	if err != nil {
		return err
	}
	overPool, err := remote.New(ctx, remote.Options{Server: "http://" + tln.Addr().String(), Token: ptok})
	if err != nil {
		return err
	}

	fmt.Printf("# agentbox serve against the library, native backend, %d CPUs, %s\n\n", runtime.NumCPU(), time.Now().UTC().Format(time.DateTime))
	fmt.Println("| measurement | library | through the server | difference |")
	fmt.Println("|---|---|---|---|")
	if err := benchExec(ctx, lib, overUnix, overTCP, execN); err != nil {
		return err
	}
	if err := benchCreate(ctx, lib, overUnix, createN); err != nil {
		return err
	}
	if err := benchAcquire(ctx, lib, srv, overPool, acquireN); err != nil {
		return err
	}
	if err := benchConcurrent(ctx, overUnix, clients, perClient); err != nil {
		return err
	}
	return benchIdle(ctx, overUnix, idleN)
}

var trueReq = sandbox.ExecRequest{Cmd: []string{"true"}}

func timedExec(ctx context.Context, s sandbox.Session) (time.Duration, error) {
	t0 := time.Now()
	res, err := sandbox.Exec(ctx, s, trueReq)
	d := time.Since(t0)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("true exited %d: %s", res.ExitCode, res.Stderr)
	}
	return d, err
}

func benchExec(ctx context.Context, lib sandbox.Client, overUnix, overTCP *remote.Client, n int) error {
	spec := sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 256 << 20}}}
	ls, err := lib.Create(ctx, spec)
	if err != nil {
		return err
	}
	defer ls.Close(ctx)
	us, err := overUnix.Create(ctx, spec)
	if err != nil {
		return err
	}
	defer us.Close(ctx)
	ts, err := overTCP.Create(ctx, spec)
	if err != nil {
		return err
	}
	defer ts.Close(ctx)
	var l, u, t series
	for i := range n + 10 {
		for _, side := range []struct {
			s  sandbox.Session
			to *series
		}{{ls, &l}, {us, &u}, {ts, &t}} {
			d, err := timedExec(ctx, side.s)
			if err != nil {
				return err
			}
			if i >= 10 { // warm-up rounds are dropped
				side.to.add(d)
			}
		}
	}
	fmt.Printf("| exec `true` in a live session, p50 (N=%d), unix socket | %s | %s | %s |\n", n, ms(l.pct(.5)), ms(u.pct(.5)), diff(l.pct(.5), u.pct(.5)))
	fmt.Printf("| exec `true`, p95, unix socket | %s | %s | %s |\n", ms(l.pct(.95)), ms(u.pct(.95)), diff(l.pct(.95), u.pct(.95)))
	fmt.Printf("| exec `true`, p50, TCP loopback | %s | %s | %s |\n", ms(l.pct(.5)), ms(t.pct(.5)), diff(l.pct(.5), t.pct(.5)))
	return nil
}

func benchCreate(ctx context.Context, lib sandbox.Client, over *remote.Client, n int) error {
	spec := sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 256 << 20}}}
	var l, r series
	for range n {
		for _, side := range []struct {
			c  sandbox.Client
			to *series
		}{{lib, &l}, {over, &r}} {
			t0 := time.Now()
			s, err := side.c.Create(ctx, spec)
			if err != nil {
				return err
			}
			side.to.add(time.Since(t0))
			if err := s.Close(ctx); err != nil {
				return err
			}
		}
	}
	fmt.Printf("| session create, p50 (N=%d) | %s | %s | %s |\n", n, ms(l.pct(.5)), ms(r.pct(.5)), diff(l.pct(.5), r.pct(.5)))
	return nil
}

func benchConcurrent(ctx context.Context, over *remote.Client, clients, per int) error {
	sessions := make([]sandbox.Session, clients)
	for i := range sessions {
		s, err := over.Create(ctx, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 64 << 20}}})
		if err != nil {
			return fmt.Errorf("create session %d of %d: %w", i+1, clients, err)
		}
		sessions[i] = s
	}
	defer func() {
		for _, s := range sessions {
			_ = s.Close(ctx)
		}
	}()
	var mu sync.Mutex
	var all series
	var failures []error
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				d, err := timedExec(ctx, s)
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					all.add(d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	total := clients * per
	fmt.Printf("| %d clients x %d execs through the server | | %d failures, %.0f execs/s, p50 %s, p99 %s | |\n",
		clients, per, len(failures), float64(total-len(failures))/wall.Seconds(), ms(all.pct(.5)), ms(all.pct(.99)))
	if len(failures) > 0 {
		return fmt.Errorf("%d of %d execs failed, the first: %w", len(failures), total, errors.Join(failures[0]))
	}
	return nil
}

func benchIdle(ctx context.Context, over *remote.Client, n int) error {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	sessions := make([]sandbox.Session, 0, n)
	defer func() {
		for _, s := range sessions {
			_ = s.Close(ctx)
		}
	}()
	for range n {
		s, err := over.Create(ctx, sandbox.Spec{Policy: sandbox.Policy{Resources: sandbox.Resources{MemoryBytes: 64 << 20}}})
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
	}
	after := heap()
	per := float64(int64(after)-int64(before)) / float64(n)
	fmt.Printf("| server memory per idle session (Go heap, N=%d; this process is server and client) | | %.1f KiB | |\n", n, per/1024)
	return nil
}

// poolSize is how many sessions the pooled tenant keeps ready.
const poolSize = 2

// benchAcquire takes a session from a warm pool: in-process from a
// pool.Pool over the library, and through the server from the pool of a
// tenant whose config keeps one, over TCP loopback. Each round waits for
// both pools to be full, so every acquire is a hit, as in a server whose
// pool is sized for its load.
func benchAcquire(ctx context.Context, lib sandbox.Client, srv *server.Server, over *remote.Client, n int) error {
	var sp sandbox.Spec
	sp.Policy.Resources.MemoryBytes = 256 << 20
	lp, err := pool.New(lib, pool.Options{}, pool.Template{Name: "bench", Spec: sp, Size: poolSize})
	if err != nil {
		return err
	}
	defer lp.Close(ctx)
	full := func() error {
		deadline := time.Now().Add(time.Minute)
		for {
			ls, ss := lp.Stats(), srv.PoolStats("pooled")
			if len(ls) == 1 && ls[0].Ready == poolSize && len(ss) == 1 && ss[0].Ready == poolSize {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("acquire: the pools did not fill in a minute: library %+v, server %+v", ls, ss)
			}
			time.Sleep(time.Millisecond)
		}
	}
	var l, r series
	for range n {
		for _, side := range []struct {
			c  sandbox.Client
			to *series
		}{{lp, &l}, {over, &r}} {
			if err := full(); err != nil {
				return err
			}
			t0 := time.Now()
			s, err := side.c.Create(ctx, sp)
			if err != nil {
				return err
			}
			side.to.add(time.Since(t0))
			if err := s.Close(ctx); err != nil {
				return err
			}
		}
	}
	ls, ss := lp.Stats()[0], srv.PoolStats("pooled")[0]
	if ls.Miss > 0 || ss.Miss > 0 || ss.Hits != uint64(n) {
		return fmt.Errorf("acquire: not every acquire was a hit: library %+v, server %+v", ls, ss)
	}
	fmt.Printf("| session acquire from a warm pool, p50 (N=%d), TCP loopback | %s | %s | %s |\n", n, ms(l.pct(.5)), ms(r.pct(.5)), diff(l.pct(.5), r.pct(.5)))
	fmt.Printf("| session acquire from a warm pool, p99 | %s | %s | %s |\n", ms(l.pct(.99)), ms(r.pct(.99)), diff(l.pct(.99), r.pct(.99)))
	return nil
}
