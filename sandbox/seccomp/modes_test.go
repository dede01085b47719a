//go:build linux

package seccomp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// setIDScript tries every way a shell and python set a setuid or setgid
// mode on a file it created, then a plain chmod, and says which worked.
const setIDScript = `cd "$1" || exit 9
touch f
chmod 0755 f && echo plain-chmod-ok
chmod u+s f && echo setuid-chmod-ok
chmod g+s f && echo setgid-chmod-ok
if command -v python3 >/dev/null; then
	python3 -c 'import os; os.close(os.open("g", os.O_CREAT|os.O_WRONLY, 0o4755))' 2>/dev/null && echo setuid-create-ok
	python3 -c 'import os; os.mknod("h", 0o100000|0o2755)' 2>/dev/null && echo setgid-mknod-ok
fi
true`

func TestPlantingASetuidOrSetgidFileFailsButPlainModesWork(t *testing.T) {
	run := func(filter bool) (string, string) {
		dir := t.TempDir()
		out := child(t, "exec", filter, "sh", "-c", setIDScript, "sh", dir)
		return out, dir
	}
	out, dir := run(true)
	if !strings.Contains(out, "plain-chmod-ok") {
		t.Fatalf("a plain chmod failed under the filter: %q", out)
	}
	for _, attack := range []string{"setuid-chmod-ok", "setgid-chmod-ok", "setuid-create-ok", "setgid-mknod-ok"} {
		if strings.Contains(out, attack) {
			t.Errorf("under the filter: %s", attack)
		}
	}
	for _, name := range []string{"f", "g", "h"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			continue // creation refused: nothing planted
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s was left with mode %v", name, fi.Mode())
		}
	}

	// Control: without the filter the same script does plant the bits, so
	// the assertions above can fail.
	if os.Geteuid() != 0 {
		t.Log("control run skipped: setting setgid on a file needs its group")
		return
	}
	ctl, _ := run(false)
	if !strings.Contains(ctl, "setuid-chmod-ok") {
		t.Errorf("control run without the filter could not chmod u+s: %q", ctl)
	}
	if _, err := exec.LookPath("python3"); err == nil && !strings.Contains(ctl, "setuid-create-ok") {
		t.Errorf("control run without the filter could not create a setuid file: %q", ctl)
	}
}
