package escapetest

import (
	"os"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// TestChangingTheModeOfDevOrAMaskedFileFails: root inside owns the
// sandbox's /dev tmpfs and the mask file bound over /proc/keys and the
// other masked entries (both are created by the init as uid 0), and chmod
// needs only ownership, not a capability; landlock has no right for
// chmod. The mounts should be read-only so that only the kernel's mount
// flags, not landlock's write rights alone, keep them as built.
func TestChangingTheModeOfDevOrAMaskedFileFails(t *testing.T) {
	// A session of its own: a successful chmod must not leak into the
	// shared one.
	s := newSession(t, sandbox.Spec{User: "0"})
	cases := []struct{ name, script string }{
		{"chmod /dev", "chmod 0777 /dev"},
		{"chmod a masked /proc file", "[ -e /proc/keys ] || exit 2; chmod 0666 /proc/keys"},
	}
	scripts := make([]string, len(cases))
	for i, c := range cases {
		scripts[i] = c.script
	}
	rs := shBatch(t, s, scripts)
	for i, c := range cases {
		switch {
		case i == 1 && rs[i].code == 2:
			t.Logf("%s: /proc/keys absent on this kernel", c.name)
		case rs[i].code == 0:
			t.Errorf("%s as root inside succeeded, want EROFS", c.name)
		default:
			t.Logf("%s: refused: %s", c.name, rs[i].out)
		}
	}
}

// TestChangingAHostDeviceNodeFromInsideFails: the device nodes in the
// sandbox's /dev are binds of the host's; without a user namespace root
// inside is host uid 0 and owns them, so on a writable bind chmod, chown
// or touch would change the host's /dev/null itself.
func TestChangingAHostDeviceNodeFromInsideFails(t *testing.T) {
	before, err := os.Stat("/dev/null")
	if err != nil {
		testenv.Skipf(t, "no /dev/null on the host")
	}
	s := newSession(t, sandbox.Spec{User: "0"})
	rs := shBatch(t, s, []string{
		"chmod 0666 /dev/null",
		"chown 0:0 /dev/null",
		"touch /dev/null",
		"echo still-usable > /dev/null",
	})
	for i, name := range []string{"chmod", "chown", "touch"} {
		if rs[i].code == 0 {
			t.Errorf("%s /dev/null as root inside succeeded, want EROFS", name)
		}
	}
	if rs[3].code != 0 {
		t.Errorf("writing to /dev/null failed: %s", rs[3].out)
	}
	after, err := os.Stat("/dev/null")
	if err != nil || !after.ModTime().Equal(before.ModTime()) || after.Mode() != before.Mode() {
		t.Errorf("the host's /dev/null changed: %v %v -> %v %v", before.Mode(), before.ModTime(), after.Mode(), after.ModTime())
	}
}
