package linux

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// CRIU is tried for real: the refusal must carry what CRIU itself says
// on this host (criu check's errors), or, where CRIU runs, the landlock
// domain it cannot save; either way it points to the workspace-only stop.
func TestHibernateRefusesByNameWithCRIUsOwnReason(t *testing.T) {
	criu := testenv.NeedCommand(t, "criu")
	c := newTestClient(t)
	s := newTestSession(t, c, sandbox.Spec{})
	run(t, s, "sh", "-c", "i=0; (while :; do i=$((i+1)); echo $i > n; sleep 0.05; done) >/dev/null 2>&1 &")
	err := sandbox.Hibernate(context.Background(), s)
	if !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("Hibernate: err = %v, want ErrUnsupported with CRIU's reason", err)
	}
	out, checkErr := exec.Command(criu, "check").CombinedOutput()
	switch {
	case checkErr != nil:
		if want := criuErrors(out); !strings.Contains(err.Error(), want) {
			t.Fatalf("Hibernate's refusal %q does not carry criu check's errors %q", err, want)
		}
	case !strings.Contains(err.Error(), "landlock"):
		t.Fatalf("criu check passes, and the refusal names no landlock domain: %v", err)
	}
	if !strings.Contains(err.Error(), "Fork") || !strings.Contains(err.Error(), "Rebuild") {
		t.Fatalf("the refusal offers no workspace-only stop: %v", err)
	}
	t.Logf("measured: %v", err)
	// Nothing was stopped: the counter still runs.
	run(t, s, "sh", "-c", `a=$(cat n); sleep 0.3; [ "$(cat n)" -gt "$a" ]`)
	if err := sandbox.Wake(context.Background(), s); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("Wake: err = %v, want ErrUnsupported", err)
	}
}
