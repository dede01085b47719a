package escapetest

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox/linux/internal/asnobody"
)

// The whole suite again, as an unprivileged user: the native backend's
// rootless mode (a user namespace per session) must stop every attack that
// it claims to stop. A part it does not claim rootless (the cgroup limits,
// the disk quota, tree-kill timeouts) makes its attack skip or expect a
// refusal, by name, in the child run; TestEveryAttackAlsoFailsRootless
// lists the skips.

// rootless reports whether this is the child run, as nobody.
func rootless() bool { return asnobody.Child() }

// rootlessHelperDir is where the child run finds the attack helper.
func rootlessHelperDir() string { return os.Getenv("FILES") }

// skipRootless skips a test, in the rootless run only, whose set-up needs
// root on the host. A plain skip, not testenv's: it is what the rootless
// run is, not something the host lacks (and the child run has no CI=true).
func skipRootless(t *testing.T, why string) {
	t.Helper()
	if rootless() {
		t.Skip("rootless run: " + why)
	}
}

func TestEveryAttackAlsoFailsRootless(t *testing.T) {
	if rootless() {
		t.Skip("this is the rootless run") // not reached: the child run is given -test.skip for it
	}
	newClient(t) // as root: builds the helper, or skips
	log, err := asnobody.Run(t, []string{"-test.v", "-test.count=1", "-test.timeout=15m",
		"-test.skip", "^TestEveryAttackAlsoFailsRootless$"}, nil, hostHelper)
	passed := regexp.MustCompile(`(?m)^--- PASS: (Test\S+)`).FindAllStringSubmatch(log, -1)
	skipped := regexp.MustCompile(`(?m)^--- SKIP: (Test\S+)`).FindAllStringSubmatch(log, -1)
	failed := regexp.MustCompile(`(?m)^\s*--- FAIL: (Test\S+)`).FindAllStringSubmatch(log, -1)
	if err != nil || len(failed) > 0 {
		t.Fatalf("the escape tests as nobody failed (%v):\n%s", err, log)
	}
	if len(passed) == 0 {
		t.Fatalf("no escape test passed as nobody:\n%s", log)
	}
	var names []string
	for _, m := range skipped {
		names = append(names, m[1])
	}
	t.Logf("as nobody: %d attacks stopped; %d skipped (a part rootless mode does not claim): %s",
		len(passed), len(skipped), strings.Join(names, ", "))
}
