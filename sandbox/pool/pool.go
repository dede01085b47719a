// Package pool keeps sessions made ahead of need, so that a Create whose
// spec matches a template returns at once instead of building a sandbox.
//
// A Pool wraps any sandbox.Client and is one: Create hands out a ready
// session when the spec is a template's (the same spec, field for field)
// and otherwise passes the call through, as it does Resume, Rebuild and
// Delete. A session is handed out once and never comes back: the pool
// makes a new one in the background to take its place, so a pooled
// session is as fresh as one made on the spot (no file, process,
// environment or network state of an earlier user, since it never had
// one).
//
// Sessions in the pool belong to the process that made the pool, as any
// session does (see sandbox.Spec.Detached): they end with it. Close ends
// those not handed out. Detached ones outlive a pool whose process is
// killed: Options.Made and Options.Closed let the caller keep a record
// from which to end them later.
package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// Template is a kind of session kept ready.
type Template struct {
	// Name names the template in errors, logs and Stats.
	Name string
	// Spec is what each session is created with. It may not name a host
	// workspace (each pooled session needs a workspace of its own) nor a
	// session timeout (it would start when the session is made, not when
	// it is handed out).
	Spec sandbox.Spec
	// Size is how many sessions are kept ready (at least 1).
	Size int
}

// Stat is one template's state, for metrics and tests.
type Stat struct {
	Name  string
	Ready int    // sessions ready now
	Hits  uint64 // Creates served from the pool
	Miss  uint64 // Creates that matched but found the pool empty
	Err   string // the last error making a session, "" once one succeeds
}

// Options are a pool's optional settings.
type Options struct {
	// Logger gets the failures to make a session (default: none).
	Logger *slog.Logger
	// Made, when set, is told of each session before it is kept ready.
	// An error closes the session and counts as a failure to make one,
	// so that no session is kept that Made did not take.
	Made func(sandbox.Session) error
	// Closed, when set, is told of each ready session Close ended.
	Closed func(sandbox.Session)
}

// Pool is a sandbox.Client that serves matching Creates from sessions
// made ahead.
type Pool struct {
	sandbox.Client
	opts   Options
	log    *slog.Logger
	ts     []*template
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type template struct {
	Template
	key   []byte
	ready chan sandbox.Session
	take  chan struct{} // a session was taken: make another

	mu        sync.Mutex
	hits, mis uint64
	err       string
}

// New starts a pool over c that keeps the templates' sessions ready,
// making them in the background from now on.
func New(c sandbox.Client, opts Options, templates ...Template) (*Pool, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{Client: c, opts: opts, log: log}
	for i, t := range templates {
		if t.Name == "" {
			t.Name = fmt.Sprintf("template %d", i+1)
		}
		switch {
		case t.Size < 1:
			return nil, fmt.Errorf("pool: %s: size %d: keep at least one session ready", t.Name, t.Size)
		case t.Spec.Workspace != "":
			return nil, fmt.Errorf("pool: %s: names the workspace %s: each pooled session needs a workspace of its own; leave Workspace empty (a manifest or a snapshot can seed it)", t.Name, t.Spec.Workspace)
		case t.Spec.Policy.Resources.SessionTimeout > 0:
			return nil, fmt.Errorf("pool: %s: a session timeout (%s) would start when the pooled session is made, not when it is handed out; pool sessions without one and end them yourself", t.Name, t.Spec.Policy.Resources.SessionTimeout)
		}
		key, err := keyOf(t.Spec)
		if err != nil {
			return nil, fmt.Errorf("pool: %s: %w", t.Name, err)
		}
		for _, o := range p.ts {
			if bytes.Equal(o.key, key) {
				return nil, fmt.Errorf("pool: %s and %s have the same spec", o.Name, t.Name)
			}
		}
		p.ts = append(p.ts, &template{Template: t, key: key, ready: make(chan sandbox.Session, t.Size), take: make(chan struct{}, 1)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for _, t := range p.ts {
		p.wg.Add(1)
		go p.fill(ctx, t)
	}
	return p, nil
}

// keyOf is the spec's identity for matching: its JSON form, in which
// empty fields are left out, so a nil and an empty map are alike.
func keyOf(spec sandbox.Spec) ([]byte, error) {
	return json.Marshal(spec)
}

// Create hands out a ready session when spec is a template's, and makes
// one through the wrapped client otherwise (or when that template's
// sessions are all taken).
func (p *Pool) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Session, error) {
	if t := p.match(spec); t != nil {
		select {
		case s := <-t.ready:
			t.count(true)
			select {
			case t.take <- struct{}{}:
			default: // the filler already knows
			}
			return s, nil
		default:
			t.count(false)
		}
	}
	return p.Client.Create(ctx, spec)
}

func (p *Pool) match(spec sandbox.Spec) *template {
	if len(p.ts) == 0 {
		return nil
	}
	key, err := keyOf(spec)
	if err != nil {
		return nil
	}
	for _, t := range p.ts {
		if bytes.Equal(t.key, key) {
			return t
		}
	}
	return nil
}

func (t *template) count(hit bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if hit {
		t.hits++
	} else {
		t.mis++
	}
}

// fill keeps t's sessions ready until ctx ends. A failure is logged and
// retried with a growing pause (up to 30 s), and shows in Stats.
func (p *Pool) fill(ctx context.Context, t *template) {
	defer p.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		for len(t.ready) < cap(t.ready) {
			s, err := p.Client.Create(ctx, t.Spec)
			if ctx.Err() != nil {
				if s != nil {
					_ = s.Close(context.Background())
				}
				return
			}
			if err == nil && p.opts.Made != nil {
				if err = p.opts.Made(s); err != nil {
					if cerr := s.Close(context.Background()); cerr != nil {
						err = errors.Join(err, fmt.Errorf("close session %s: %w", s.ID(), cerr))
					}
				}
			}
			if err != nil {
				t.mu.Lock()
				t.err = err.Error()
				t.mu.Unlock()
				p.log.Warn("pool: make a session", "template", t.Name, "err", err, "retry_in", backoff)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 30*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			t.mu.Lock()
			t.err = ""
			t.mu.Unlock()
			t.ready <- s // never blocks: only this goroutine adds
		}
		select {
		case <-ctx.Done():
			return
		case <-t.take:
		}
	}
}

// Stats reports each template's state.
func (p *Pool) Stats() []Stat {
	var out []Stat
	for _, t := range p.ts {
		t.mu.Lock()
		out = append(out, Stat{Name: t.Name, Ready: len(t.ready), Hits: t.hits, Miss: t.mis, Err: t.err})
		t.mu.Unlock()
	}
	return out
}

// Close stops making sessions and closes those not handed out. Sessions
// already handed out are their holders' to close.
func (p *Pool) Close(ctx context.Context) error {
	p.cancel()
	p.wg.Wait()
	var errs []error
	for _, t := range p.ts {
		for {
			select {
			case s := <-t.ready:
				if err := s.Close(ctx); err != nil {
					errs = append(errs, fmt.Errorf("pool: %s: close session %s: %w", t.Name, s.ID(), err))
				} else if p.opts.Closed != nil {
					p.opts.Closed(s)
				}
				continue
			default:
			}
			break
		}
	}
	return errors.Join(errs...)
}
