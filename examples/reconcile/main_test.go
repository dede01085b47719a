package reconcile_test

import (
	"os"
	"testing"

	"github.com/agentbox/agentbox/sandbox/linux"
)

// TestMain lets the test binary serve as the linux backend's sandbox init
// (the backend re-executes its own binary) before any test runs.
func TestMain(m *testing.M) {
	linux.Main()
	os.Exit(m.Run())
}
