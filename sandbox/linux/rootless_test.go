package linux

import (
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox/linux/internal/asnobody"
)

// TestConformanceRootless runs the conformance suite (TestConformance)
// again as nobody, against rootless sessions: exec, files, terminals,
// resume, snapshots and the policy checks must hold there too.
func TestConformanceRootless(t *testing.T) {
	if asnobody.Child() {
		t.Skip("this is the rootless run") // not reached: the child run is given -test.run ^TestConformance$
	}
	testenv.NeedRoot(t, "rerunning the suite as nobody")
	log, err := asnobody.Run(t, []string{"-test.v", "-test.count=1", "-test.timeout=10m", "-test.run", "^TestConformance$"}, nil)
	failed := regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`).FindAllString(log, -1)
	if err != nil || len(failed) > 0 || !regexp.MustCompile(`(?m)^--- PASS: TestConformance `).MatchString(log) {
		t.Fatalf("the conformance suite as nobody failed (%v):\n%s", err, log)
	}
	passed := regexp.MustCompile(`(?m)^\s+--- PASS: `).FindAllString(log, -1)
	skipped := regexp.MustCompile(`(?m)^\s+--- SKIP: (\S+)`).FindAllStringSubmatch(log, -1)
	var names []string
	for _, m := range skipped {
		names = append(names, m[1])
	}
	t.Logf("as nobody: %d conformance checks passed, %d skipped: %s", len(passed), len(skipped), strings.Join(names, ", "))
	if len(passed) < 30 {
		t.Errorf("only %d conformance checks passed as nobody:\n%s", len(passed), log)
	}
}
