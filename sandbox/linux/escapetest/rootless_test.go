package escapetest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// The whole suite again, as an unprivileged user: the native backend's
// rootless mode (a user namespace per session) must stop every attack that
// it claims to stop. A part it does not claim rootless (the cgroup limits,
// the disk quota, tree-kill timeouts) makes its attack skip, by name, in
// the child run; TestEveryAttackAlsoFailsRootless lists those skips.

const (
	// rootlessEnv marks the child run.
	rootlessEnv = "AGENTBOX_ESCAPETEST_ROOTLESS"
	// rootlessHelperEnv names the attack helper's directory for it.
	rootlessHelperEnv = "AGENTBOX_ESCAPETEST_HELPER_DIR"
	// nobody is the uid and gid the child runs as.
	nobody = 65534
)

// skipRootless skips a test, in the rootless run only, whose set-up needs
// root on the host.
func skipRootless(t *testing.T, why string) {
	t.Helper()
	if rootless() {
		t.Skip("rootless run: " + why)
	}
}

// rootless reports whether this is the child run, as nobody.
func rootless() bool { return os.Getenv(rootlessEnv) == "1" && os.Geteuid() != 0 }

func TestEveryAttackAlsoFailsRootless(t *testing.T) {
	if rootless() {
		t.Skip("this is the rootless run")
	}
	c := newClient(t) // as root: builds the helper, or skips
	_ = c
	// The test binary and the helper, where nobody can run them (the
	// build directory and the checkout may be closed to other users).
	dir, err := os.MkdirTemp("", "agentbox-escapetest-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "escapetest.test")
	helperDir := filepath.Join(dir, "helper")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{helperDir, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(tmp, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, bin)
	copyFile(t, hostHelper, filepath.Join(helperDir, "attack"))
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "-test.v", "-test.count=1", "-test.timeout=15m", "-test.skip", "^TestEveryAttackAlsoFailsRootless$")
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + tmp, "TMPDIR=" + tmp,
		rootlessEnv + "=1", rootlessHelperEnv + "=" + helperDir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	log := out.String()
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

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
