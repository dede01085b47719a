package docker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// engineErr is why no engine answered, set by TestMain; tests skip with it
// (or fail when CI=true: a skip in CI is a broken CI set-up).
var engineErr error

func TestMain(m *testing.M) {
	if mode := os.Getenv(ownerHelperEnv); mode != "" {
		runOwnerHelper(mode)
	}
	c, err := New(Options{})
	if err != nil {
		engineErr = err
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		start := time.Now()
		res, err := c.BuildBaseImage(ctx, BuildOptions{})
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "build base image:", err)
			os.Exit(1)
		}
		if !res.Cached {
			fmt.Fprintf(os.Stderr, "built %s (%d files, %d MiB) in %s\n", res.Image, res.Files, res.Bytes>>20, time.Since(start).Round(time.Millisecond))
		}
		c.Close()
	}
	os.Exit(m.Run())
}

// testClient returns a client of the real engine, or skips (fails in CI).
func testClient(t *testing.T) *Client {
	t.Helper()
	testenv.NeedDocker(t, engineErr)
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
