package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// procTable holds one session's running exec_command processes.
type procTable struct {
	sess sandbox.Session
	// policy is the session's, whose limits bound every command.
	policy     sandbox.Policy
	timeout    time.Duration
	maxTimeout time.Duration
	max        int

	mu     sync.Mutex
	procs  map[int]*runningProc
	nextID int
	note   string
	closed bool
}

// runningProc is a started command and the output it produced.
type runningProc struct {
	id       int
	display  string
	tty      bool
	timeout  time.Duration
	proc     sandbox.Process
	out      *pendingOutput
	started  time.Time
	lastUsed time.Time
	timedOut atomic.Bool
	cancel   context.CancelFunc

	done    chan struct{}
	status  sandbox.ExitStatus
	waitErr error
	ended   time.Time
}

// start launches argv and the goroutines that drain its output, wait for
// it, and kill it at its timeout. The process is not bound to ctx: a
// command that outlives the tool call keeps running until it ends, times
// out, or the session's run ends.
func (t *procTable) start(ctx context.Context, argv []string, display, workdir string, tty bool, timeout time.Duration) (*runningProc, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, sandbox.Wrap("exec_command", sandbox.ErrClosed, errors.New("the shell of this session was closed"))
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// The backend is told the timeout too, so one that enforces it in
	// Start (the native init) kills the tree at the same moment.
	req := sandbox.ExecRequest{Cmd: argv, Workdir: workdir, TTY: tty, Timeout: timeout}
	if tty {
		req.Rows, req.Cols = 24, 120
	}
	proc, err := t.sess.Start(pctx, req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("exec_command: start %q: %w", display, err)
	}
	p := &runningProc{
		display: display, tty: tty, timeout: timeout, proc: proc,
		out: &pendingOutput{max: 1 << 20}, started: time.Now(),
		cancel: cancel, done: make(chan struct{}),
	}
	p.lastUsed = p.started
	if !tty {
		// Without a terminal nobody can type, so the command reads EOF
		// rather than hanging on its input.
		_ = proc.Stdin().Close()
	}
	var wg sync.WaitGroup
	for _, r := range []io.Reader{proc.Stdout(), proc.Stderr()} {
		if r == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(p.out, r)
		}()
	}
	killer := time.AfterFunc(timeout, func() {
		p.timedOut.Store(true)
		_ = proc.Kill(context.Background())
	})
	go func() {
		defer close(p.done)
		wg.Wait()
		p.status, p.waitErr = proc.Wait(context.Background())
		p.ended = time.Now()
		killer.Stop()
		if p.timedOut.Load() {
			p.status.TimedOut = true
		}
		cancel()
	}()
	t.add(p)
	return p, nil
}

// add registers p, ending the least recently used process when the table
// is full.
func (t *procTable) add(p *runningProc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nextID++
	p.id = t.nextID
	t.procs[p.id] = p
	if len(t.procs) <= t.max {
		return
	}
	var oldest *runningProc
	for _, q := range t.procs {
		if q != p && (oldest == nil || q.lastUsed.Before(oldest.lastUsed)) {
			oldest = q
		}
	}
	if oldest != nil {
		delete(t.procs, oldest.id)
		_ = oldest.proc.Kill(context.Background())
		t.note = fmt.Sprintf("note: session %d (%s) was ended to stay within %d running processes", oldest.id, oldest.display, t.max)
	}
}

func (t *procTable) get(id int) *runningProc {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.procs[id]
}

func (t *procTable) touch(p *runningProc) {
	t.mu.Lock()
	p.lastUsed = time.Now()
	t.mu.Unlock()
}

func (t *procTable) remove(id int) {
	t.mu.Lock()
	delete(t.procs, id)
	t.mu.Unlock()
}

func (t *procTable) takeNote() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.note
	t.note = ""
	return n
}

// closeAll kills every running process and waits (bounded by ctx) for
// them to end.
func (t *procTable) closeAll(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	procs := make([]*runningProc, 0, len(t.procs))
	for _, p := range t.procs {
		procs = append(procs, p)
	}
	t.procs = map[int]*runningProc{}
	t.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if err := p.proc.Kill(ctx); err != nil {
			errs = append(errs, fmt.Errorf("kill %q: %w", p.display, err))
		}
	}
	deadline := time.After(killGrace)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			return errors.Join(append(errs, fmt.Errorf("%q did not end within %s of being killed", p.display, killGrace))...)
		case <-ctx.Done():
			return errors.Join(append(errs, fmt.Errorf("waiting for %q to end: %w", p.display, ctx.Err()))...)
		}
	}
	return errors.Join(errs...)
}

// pendingOutput collects output not yet returned to the model. Past max
// bytes it keeps the first and last halves and counts what it dropped,
// so a chatty background process cannot grow memory without bound.
type pendingOutput struct {
	mu      sync.Mutex
	max     int
	head    []byte
	tail    []byte
	dropped int64
}

func (o *pendingOutput) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(b)
	half := o.max / 2
	if room := half - len(o.head); room > 0 {
		k := min(room, len(b))
		o.head = append(o.head, b[:k]...)
		b = b[k:]
	}
	if len(b) == 0 {
		return n, nil
	}
	o.tail = append(o.tail, b...)
	if over := len(o.tail) - half; over > 0 {
		o.dropped += int64(over)
		o.tail = append(o.tail[:0], o.tail[over:]...)
	}
	return n, nil
}

// take returns and clears the pending output and the dropped count.
func (o *pendingOutput) take() ([]byte, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := append(o.head, o.tail...)
	d := o.dropped
	o.head, o.tail, o.dropped = nil, nil, 0
	return out, d
}
