package escapetest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
)

// hostOwned makes a workspace owned by host uid and gid 4242 holding a
// file only host root may write (rootonly, 0644) and one only host uid
// 4343 may read (other, 0600), and returns it with a host-side snapshot
// of every path's owner.
func hostOwned(t *testing.T) string {
	t.Helper()
	if rootless() {
		t.Skip("ownership across host users needs root")
	}
	ws := filepath.Join(t.TempDir(), "ws")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(ws, 0o755))
	must(os.Chown(ws, 4242, 4242))
	must(os.WriteFile(filepath.Join(ws, "rootonly"), []byte("host root's\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "other"), []byte("4343's secret\n"), 0o600))
	must(os.Chown(filepath.Join(ws, "other"), 4343, 4343))
	return ws
}

// owner is the host uid and gid of p, and its mode.
func owner(t *testing.T, p string) (uint32, uint32, os.FileMode) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, st.Gid, os.FileMode(st.Mode & 0o7777)
}

// TestRootInsideIsNoOneOutside: root inside a session (Spec.User "0")
// owns the workspace, as the session user does, and nothing else: a host
// file of another owner in it is neither writable nor readable, a chown
// to root lands as the workspace's owner, a setuid bit never reaches the
// host, and what root inside makes is the workspace owner's.
func TestRootInsideIsNoOneOutside(t *testing.T) {
	ws := hostOwned(t)
	c := newClient(t)
	s, err := c.Create(context.Background(), withHelper(sandbox.Spec{Workspace: ws, User: "0"}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	r := sh(t, s, `
echo pwned >> rootonly 2>/dev/null && echo WROTE-ROOTONLY
cat other 2>/dev/null && echo READ-OTHER
echo made > made
chown 0:0 made 2>/dev/null
chmod u+s made 2>/dev/null
id -u
stat -c '%u %U' made`)
	out := string(r.Stdout)
	for _, bad := range []string{"WROTE-ROOTONLY", "READ-OTHER", "4343's secret"} {
		if strings.Contains(out, bad) {
			t.Errorf("root inside did %s:\n%s", bad, out)
		}
	}
	if !strings.HasPrefix(out, "0\n0 root") {
		t.Errorf("inside, root should run as 0 and own what it makes: %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "rootonly")); string(b) != "host root's\n" {
		t.Errorf("host root's file became %q", b)
	}
	uid, gid, mode := owner(t, filepath.Join(ws, "made"))
	if uid != 4242 || gid != 4242 {
		t.Errorf("a file root inside made (and chowned to 0) is %d:%d on the host, want the workspace owner's 4242:4242", uid, gid)
	}
	if mode&os.FileMode(unix.S_ISUID|unix.S_ISGID) != 0 {
		t.Errorf("a file made inside is %v on the host: setuid", mode)
	}
	for _, p := range []string{"rootonly", "other", "."} {
		if u, _, _ := owner(t, filepath.Join(ws, p)); (p == "rootonly" && u != 0) || (p == "other" && u != 4343) || (p == "." && u != 4242) {
			t.Errorf("%s changed owner to %d", p, u)
		}
	}
}

// TestNoHostAccountSharesASandboxUID: the host ids a session runs as are
// no account's, and no other live session's.
func TestNoHostAccountSharesASandboxUID(t *testing.T) {
	if rootless() {
		t.Skip("a rootless session is the invoking user by design")
	}
	c := newClient(t)
	var firsts []int
	for range 2 {
		s, err := c.Create(context.Background(), withHelper(sandbox.Spec{}))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		pid, err := linux.InitPID(s.State())
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/uid_map")
		if err != nil {
			t.Fatal(err)
		}
		var inside, first, count int
		sc := bufio.NewScanner(f)
		sc.Scan()
		f.Close()
		if _, err := strconvFields(sc.Text(), &inside, &first, &count); err != nil || inside != 0 || count < 65536 {
			t.Fatalf("uid_map %q: want 0 FIRST >=65536", sc.Text())
		}
		for _, id := range []int{first, first + 1000, first + count - 1} {
			if u, err := user.LookupId(strconv.Itoa(id)); err == nil {
				t.Errorf("host id %d of the session is the account %q", id, u.Username)
			}
			if g, err := user.LookupGroupId(strconv.Itoa(id)); err == nil {
				t.Errorf("host id %d of the session is the group %q", id, g.Name)
			}
		}
		for _, other := range firsts {
			if first < other+count && other < first+count {
				t.Errorf("two live sessions share host ids from %d and %d", first, other)
			}
		}
		firsts = append(firsts, first)
	}
}

// strconvFields reads three integers separated by blanks.
func strconvFields(s string, a, b, c *int) (int, error) {
	f := strings.Fields(s)
	n := 0
	for i, p := range []*int{a, b, c} {
		if i >= len(f) {
			break
		}
		v, err := strconv.Atoi(f[i])
		if err != nil {
			return n, err
		}
		*p = v
		n++
	}
	return n, nil
}

// TestInotifyInstancesOfASessionAreItsOwn: the kernel counts inotify
// instances per user, and a session's users are its own: one that takes
// all it may leaves the host's users (root, uid 1000) and another
// session theirs.
func TestInotifyInstancesOfASessionAreItsOwn(t *testing.T) {
	if rootless() {
		t.Skip("a rootless session's user is the invoking user by design")
	}
	c := newClient(t)
	hog := func(t *testing.T, s sandbox.Session) (sandbox.Process, string) {
		t.Helper()
		p, err := s.Start(context.Background(), sandbox.ExecRequest{Cmd: []string{helper, "inotify-hold", "200"}})
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
		if err != nil {
			t.Fatalf("the inotify hog did not report: %v", err)
		}
		return p, line
	}
	for _, user := range []string{"", "0"} {
		s, err := c.Create(context.Background(), withHelper(sandbox.Spec{User: user}))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		p, line := hog(t, s)
		defer p.Close()
		if !strings.Contains(line, "inotify instances: ") {
			t.Fatalf("hog: %q", line)
		}
		// Host root and host uid 1000 still get theirs.
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			t.Fatalf("host root's inotify_init1 after a session (user %q) took %s: %v", user, line, err)
		}
		unix.Close(fd)
		out, err := asUID1000("/usr/bin/python3", "-c", "import ctypes; print('inotify fd', ctypes.CDLL(None).inotify_init1(0))")
		if err != nil || !strings.Contains(out, "inotify fd ") || strings.Contains(out, "inotify fd -1") {
			t.Fatalf("host uid 1000's inotify after a session (user %q) took %s: %q, %v", user, line, out, err)
		}
	}
	// Another session, with its hog still holding everything it may.
	s2, err := c.Create(context.Background(), withHelper(sandbox.Spec{}))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(context.Background())
	r := sh(t, s2, helper+" inotify-hold 5 </dev/null")
	if !strings.Contains(string(r.Stdout), "inotify instances: 5") {
		t.Fatalf("another session's inotify while the first one's hog runs: %q", r.Stdout)
	}
}

// asUID1000 runs a host command as uid and gid 1000.
func asUID1000(argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestALinkPlantedInASharedDirectoryNeverLeadsAMount: a session plants
// out -> a host directory in its workspace; a later session given that
// path as a mount source, read-only or read-write, or as its workspace,
// is refused naming the link, and the host directory is never mounted.
func TestALinkPlantedInASharedDirectoryNeverLeadsAMount(t *testing.T) {
	secretFile, secret := plantHostSecret(t, "")
	hostDir := filepath.Dir(secretFile)
	c := newClient(t)
	a, err := c.Create(context.Background(), withHelper(sandbox.Spec{}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	if r := sh(t, a, "ln -s "+hostDir+" out && ls -l out"); r.ExitCode != 0 {
		t.Fatalf("plant the link: %s", r.Stderr)
	}
	planted := filepath.Join(a.State().Workspace, "out")
	for _, spec := range []sandbox.Spec{
		{Mounts: []sandbox.Mount{{Source: planted, Target: "/workspace/in", ReadOnly: true}}},
		{Mounts: []sandbox.Mount{{Source: planted, Target: "/workspace/in"}}},
		{Workspace: planted},
		{Mounts: []sandbox.Mount{{Source: filepath.Join(planted, filepath.Base(secretFile)), Target: "/workspace/in.txt", ReadOnly: true}}},
	} {
		b, err := c.Create(context.Background(), withHelper(spec))
		if err == nil {
			r := sh(t, b, "cat in/secret.txt in.txt secret.txt 2>/dev/null")
			b.Close(context.Background())
			t.Fatalf("a session with %+v was created (and read %q)", spec, r.Stdout)
		}
		if !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), "out") {
			t.Errorf("refusal of %+v does not name the link: %v", spec, err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the refusal carries the secret")
		}
	}
}

// TestTheKernelsLayoutAndTheHostsIdentityAreMasked: what a sandbox has no
// need to read, and an exploit or a fingerprint would, shows nothing, to
// the sandbox user and to root inside alike.
func TestTheKernelsLayoutAndTheHostsIdentityAreMasked(t *testing.T) {
	files := []string{"/proc/slabinfo", "/proc/kpageflags", "/proc/kpagecount", "/proc/vmallocinfo", "/proc/key-users",
		"/proc/iomem", "/proc/sys/kernel/random/boot_id", "/proc/kallsyms", "/proc/keys"}
	for _, who := range bothUsers(t) {
		t.Run(who.name, func(t *testing.T) {
			for _, f := range files {
				r := sh(t, who.s, "head -c 64 "+f+" 2>/dev/null | od -An -c | head -2")
				if got := strings.TrimSpace(string(r.Stdout)); got != "" {
					t.Errorf("%s reads %q", f, got)
				}
			}
		})
	}
}
