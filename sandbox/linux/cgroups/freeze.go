package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrNoFreezer says a group cannot be frozen: it has no cgroup2
// directory (cgroup.freeze came with Linux 5.2).
var ErrNoFreezer = errors.New("no cgroup2 group to freeze (pausing needs a cgroup2 hierarchy, Linux 5.2 or later)")

// Freeze stops every process of the group where it stands, through
// cgroup2's cgroup.freeze, and waits until the kernel reports the whole
// group frozen or ctx ends. The processes keep their memory and use no
// CPU; a SIGKILL still ends them.
func (g *Group) Freeze(ctx context.Context) error { return g.setFrozen(ctx, true) }

// Thaw lets the processes of a frozen group continue, and waits until
// the kernel reports the group thawed.
func (g *Group) Thaw(ctx context.Context) error { return g.setFrozen(ctx, false) }

// Frozen reports whether the group was asked to freeze (cgroup.freeze
// reads 1); false for a group with no cgroup2 directory.
func (g *Group) Frozen() (bool, error) {
	dir := g.dirs["v2"]
	if dir == "" {
		return false, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.freeze"))
	if err != nil {
		return false, fmt.Errorf("cgroups: %w", err)
	}
	return strings.TrimSpace(string(b)) == "1", nil
}

func (g *Group) setFrozen(ctx context.Context, on bool) error {
	dir := g.dirs["v2"]
	if dir == "" {
		return ErrNoFreezer
	}
	value, want := "0", "frozen 0"
	if on {
		value, want = "1", "frozen 1"
	}
	if err := writeFile(filepath.Join(dir, "cgroup.freeze"), value); err != nil {
		return err
	}
	// The kernel sets "frozen 1" in cgroup.events once every task has
	// stopped, usually within microseconds; a task in an uninterruptible
	// sleep delays it. Poll, as the wait is short.
	delay := 100 * time.Microsecond
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			return fmt.Errorf("cgroups: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line == want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroups: wait for %s of %s: %w", want, dir, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Millisecond)
	}
}
