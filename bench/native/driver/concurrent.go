package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
)

// manyResult is the outcome of many sessions at once.
type manyResult struct {
	n        int
	failures []error
	up       time.Duration // all created and exec'd
	wall     time.Duration // until all closed
	initsPSS int64         // the inits' PSS summed while all were up
	// peakGroups is the peak of the sessions' cgroup memory charges
	// summed; peakClient the peak growth of this client's RSS.
	peakGroups, peakClient int64
	// groupsMissed are the sessions left out of peakGroups.
	groupsMissed []error
}

// memSampler follows what the sessions cost: the sum of their cgroups'
// memory charges, and how far this client process's RSS grew over its
// level at the start; it keeps the peak of each.
type memSampler struct {
	mu         sync.Mutex
	files      []string
	baseRSS    int64
	peakGroups int64
	peakClient int64
	missed     []error
	stop, done chan struct{}
}

func startSampler() *memSampler {
	m := &memSampler{baseRSS: selfRSS(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			m.sample()
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

// miss records a session whose memory group could not be found.
func (m *memSampler) miss(err error) {
	m.mu.Lock()
	m.missed = append(m.missed, err)
	m.mu.Unlock()
}

// add follows one more session's cgroup memory file.
func (m *memSampler) add(file string) {
	m.mu.Lock()
	m.files = append(m.files, file)
	m.mu.Unlock()
}

func (m *memSampler) sample() {
	m.mu.Lock()
	files := slices.Clone(m.files)
	m.mu.Unlock()
	var sum int64
	for _, f := range files {
		if n, err := readBytes(f); err == nil { // a closed session's group is gone
			sum += n
		}
	}
	client := selfRSS() - m.baseRSS
	m.mu.Lock()
	m.peakGroups = max(m.peakGroups, sum)
	m.peakClient = max(m.peakClient, client)
	m.mu.Unlock()
}

// end stops sampling and returns the peaks.
func (m *memSampler) end() (groups, client int64) {
	close(m.stop)
	<-m.done
	return m.peakGroups, m.peakClient
}

// runMany creates n sessions concurrently, runs a command in each that
// proves it is its own (echo of its index), then closes them all
// concurrently, counting every failure.
func runMany(ctx context.Context, n int, c sandbox.Client, spec sandbox.Spec) (*manyResult, error) {
	smp := startSampler()
	r := &manyResult{n: n}
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		r.failures = append(r.failures, err)
		mu.Unlock()
	}
	sessions := make([]sandbox.Session, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.Create(ctx, spec)
			if err != nil {
				fail(fmt.Errorf("session %d: create: %w", i, err))
				return
			}
			sessions[i] = s
			if pid, err := linux.InitPID(s.State()); err == nil {
				if f, err := memoryFile(pid, s.ID()); err == nil {
					smp.add(f)
				} else {
					smp.miss(err)
				}
			}
			want := strconv.Itoa(i)
			res, err := sandbox.Exec(ctx, s, sandbox.ExecRequest{Cmd: []string{"echo", want}})
			switch {
			case err != nil:
				fail(fmt.Errorf("session %d: exec: %w", i, err))
			case res.ExitCode != 0 || string(res.Stdout) != want+"\n":
				fail(fmt.Errorf("session %d: exec echo %s: exit %d, output %q", i, want, res.ExitCode, res.Stdout))
			}
		}()
	}
	wg.Wait()
	r.up = time.Since(start)
	for _, s := range sessions {
		if s == nil {
			continue
		}
		if pid, err := linux.InitPID(s.State()); err == nil {
			if m, err := memOf("/proc", pid); err == nil {
				r.initsPSS += m.PSS
			}
		}
	}
	for i, s := range sessions {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Close(ctx); err != nil {
				fail(fmt.Errorf("session %d: close: %w", i, err))
			}
		}()
	}
	wg.Wait()
	r.wall = time.Since(start)
	r.peakGroups, r.peakClient = smp.end()
	r.groupsMissed = smp.missed
	return r, nil
}

// runManyCLI starts n `agentbox exec -- true` at once and waits for all:
// the same load through the command line, one client process each.
func runManyCLI(n int, agentbox string) (*manyResult, error) {
	r := &manyResult{n: n}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command(agentbox, "exec", "--", "true").CombinedOutput()
			if err != nil {
				mu.Lock()
				r.failures = append(r.failures, fmt.Errorf("exec %d: %w: %s", i, err, out))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.wall = time.Since(start)
	r.up = r.wall
	return r, nil
}
