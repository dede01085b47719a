package egress

import (
	"fmt"
	"testing"
)

// A command's refusals are those after the count taken at its start, even
// when the proxy already dropped the oldest of the 1000 it keeps: a
// session that has been refused a thousand times still has every later
// refusal reported as its command's violation.
func TestRefusalsAfterTheFirstThousandAreStillACommandsViolations(t *testing.T) {
	p, _ := startProxy(t, Config{Allow: []string{"allowed.test"}})
	for i := range maxDenials + 5 {
		p.record("CONNECT", fmt.Sprintf("h%d.test:443", i), "not in the allow-list")
	}
	before := p.Refused()
	p.record("CONNECT", "late.test:443", "not in the allow-list")
	got := p.DenialsSince(before)
	if len(got) != 1 || got[0].String() != `CONNECT "late.test:443": not in the allow-list` {
		t.Fatalf("the command's refusals: %q", got)
	}
	if kept := p.Denials(); len(kept) != maxDenials || kept[0].Host != "h6.test:443" {
		t.Fatalf("the proxy keeps %d refusals, oldest %q; want the latest %d", len(kept), kept[0].Host, maxDenials)
	}
	if d := p.DenialsSince(p.Refused()); d != nil {
		t.Fatalf("no refusal since now, got %q", d)
	}
}
