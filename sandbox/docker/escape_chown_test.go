package docker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// swapLoop is the attacker: in its workspace it exchanges the directory d
// and the symlink l (to a host directory) with renameat2(RENAME_EXCHANGE)
// as fast as it can, for at most the given seconds or until the file stop
// appears, then prints how many swaps it made, so the test knows the race
// really ran.
const swapLoop = `python3 -c '
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
SYS_renameat2, AT_FDCWD, RENAME_EXCHANGE = 316, -100, 2
end, n = time.time() + float(sys.argv[1]), 0
while time.time() < end and not os.path.exists("stop"):
    for _ in range(1000):
        if libc.syscall(SYS_renameat2, AT_FDCWD, b"d", AT_FDCWD, b"l", RENAME_EXCHANGE) != 0:
            sys.exit("renameat2: errno %d" % ctypes.get_errno())
        n += 1
print(n)
' `

// TestTheWorkspaceOwnerCannotBeRacedOntoAHostFile is the chown-walk race
// of issue 15. A session sharing the workspace swaps a directory and a
// symlink to a host directory holding root's 0600 canary, in a loop,
// while new sessions are created on that workspace. When creating a
// session walked the workspace changing owners by path (the old giveTo),
// one of the first attempts chowned the canary to the sandbox user. No
// host path outside the workspace may change owner.
func TestTheWorkspaceOwnerCannotBeRacedOntoAHostFile(t *testing.T) {
	testenv.NeedRoot(t, "a root-owned canary and a workspace a container of another uid shares")
	c := testClient(t)
	t.Parallel()
	top := t.TempDir()
	host := filepath.Join(top, "host") // stands for /root or /etc
	ws := filepath.Join(top, "ws")
	for _, d := range []string{host, ws, filepath.Join(ws, "d")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	canary := filepath.Join(host, "canary")
	if err := os.WriteFile(canary, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 50 { // the walk needs something to chew on in d
		if err := os.WriteFile(filepath.Join(ws, "d", "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(host, filepath.Join(ws, "l")); err != nil {
		t.Fatal(err)
	}
	before := owners(t, top, ws)

	const seconds = 40
	attacker := newSession(t, c, sandbox.Spec{Workspace: ws})
	ctx, cancel := context.WithTimeout(context.Background(), (seconds+30)*time.Second)
	defer cancel()
	done := make(chan sandbox.ExecResult, 1)
	go func() {
		res, err := sandbox.Exec(ctx, attacker, sandbox.ExecRequest{Cmd: []string{"sh", "-c", swapLoop + strconv.Itoa(seconds)}, Timeout: (seconds + 20) * time.Second})
		if err != nil {
			res.Stderr = []byte(err.Error())
			res.ExitCode = -1
		}
		done <- res
	}()

	deadline := time.Now().Add(seconds * time.Second * 3 / 4)
	attempts := 0
	for ; time.Now().Before(deadline) && attempts < 20; attempts++ {
		sess, err := c.Create(testCtx(t), sandbox.Spec{Workspace: ws})
		if err == nil {
			_ = sess.Close(context.Background())
		}
		if changed := diffOwners(before, owners(t, top, ws)); changed != "" {
			t.Fatalf("attempt %d: a host path outside the workspace changed owner: %s (create: %v)", attempts+1, changed, err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := <-done
	swaps, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if res.ExitCode != 0 || swaps < 1000 {
		t.Fatalf("the attacker did not race: exit %d, %q swaps, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if changed := diffOwners(before, owners(t, top, ws)); changed != "" {
		t.Fatalf("a host path outside the workspace changed owner: %s", changed)
	}
	t.Logf("%d sessions created while the attacker made %d swaps; nothing outside the workspace changed owner", attempts, swaps)
}

// owners records uid:gid and mode of every path under top, except the
// workspace ws and what it holds.
func owners(t *testing.T, top, ws string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == ws {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		out[p] = fmt.Sprintf("%d:%d %v", st.Uid, st.Gid, fi.Mode())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffOwners(before, after map[string]string) string {
	var b strings.Builder
	for p, was := range before {
		if now := after[p]; now != was {
			fmt.Fprintf(&b, "%s was %s, now %q; ", p, was, now)
		}
	}
	return b.String()
}

// inotifyBomb opens 200 inotify instances (more than the default
// per-user limit of 128) and prints how many it got and the last errno.
const inotifyBomb = `python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
got, err = 0, 0
for _ in range(200):
    if libc.inotify_init1(0) >= 0:
        got += 1
    else:
        err = ctypes.get_errno()
print(got, err)
'`

// A session on a root-owned workspace runs as host uid 0, whose per-user
// inotify instances the host's root daemons share (issue 15: 200
// inotify_init1 calls left systemd and dockerd with EMFILE). Such a
// session gets none; another uid keeps its own.
func TestARootSessionCannotExhaustHostRootsInotifyInstances(t *testing.T) {
	testenv.NeedRoot(t, "a root-owned workspace")
	c := testClient(t)
	t.Parallel()
	root := newSession(t, c, sandbox.Spec{Workspace: ownedDir(t, 0, 0, 0o755)})
	if res := run(t, root, inotifyBomb); string(res.Stdout) != "0 38\n" {
		t.Errorf("a root session opened inotify instances: got, errno = %q (stderr %q), want none and ENOSYS", res.Stdout, res.Stderr)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("host root cannot open an inotify instance after the session tried: %v", err)
	}
	unix.Close(fd)
	user := newSession(t, c, sandbox.Spec{})
	if res := run(t, user, inotifyBomb); !strings.HasPrefix(string(res.Stdout), "128 ") && !strings.HasPrefix(string(res.Stdout), "200 ") {
		t.Logf("a uid 1000 session opened %q inotify instances", res.Stdout)
	}
	if res := run(t, user, `python3 -c 'import ctypes; print(ctypes.CDLL(None).inotify_init1(0) >= 0)'`); string(res.Stdout) != "True\n" {
		t.Errorf("a uid 1000 session has no inotify: %q (stderr %q)", res.Stdout, res.Stderr)
	}
}
