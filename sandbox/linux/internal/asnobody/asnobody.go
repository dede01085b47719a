// Package asnobody reruns a test binary as the unprivileged user nobody,
// so that a root test run also covers the native backend's rootless mode.
// It is for tests only.
package asnobody

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// UID is nobody's uid and gid.
const UID = 65534

// Env marks the child run: Child reports whether this process is one.
const Env = "AGENTBOX_TEST_AS_NOBODY"

// Child reports whether this process is a test binary rerun by Run.
func Child() bool { return os.Getenv(Env) == "1" && os.Geteuid() != 0 }

// Run copies the running test binary, and each of files into a
// subdirectory "files" beside it, to a directory nobody can reach, and
// runs it there as nobody with args, a private TMPDIR and HOME, PATH, and
// the extra environment variables env (FILES names the files directory).
// It returns the combined output and the run's error. The caller must be
// root.
func Run(t *testing.T, args []string, env []string, files ...string) (string, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentbox-as-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(self))
	filesDir := filepath.Join(dir, "files")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{filesDir, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(tmp, UID, UID); err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, bin)
	for _, f := range files {
		copyFile(t, f, filepath.Join(filesDir, filepath.Base(f)))
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = tmp
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + tmp, "TMPDIR=" + tmp, Env + "=1", "FILES=" + filesDir}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: UID, Gid: UID, Groups: []uint32{}}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
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
