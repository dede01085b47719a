package sandboxtest

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// partTests check that each policy part a backend lists in Enforces()
// holds, by trying from inside what the part forbids. A part the backend
// does not list is skipped (testRefusesUnenforcedParts covers those);
// timeouts and output caps have tests of their own in exec.go.
func partTests() []testCase {
	return []testCase{
		{name: "claimed filesystem.isolation: a host file outside the workspace is not visible", run: testPartFilesystem},
		{name: "claimed filesystem.read_only: a read-only path cannot be written", run: testPartReadOnly},
		{name: "claimed filesystem.deny: a denied path cannot be read", run: testPartDeny},
		{name: "claimed network.none: no interface but loopback (by policy: no address of the host reached)", run: testPartNetworkNone},
		{name: "claimed processes.isolation: host processes are not visible", run: testPartProcesses},
		{name: "claimed identity: no capabilities and no_new_privs", run: testPartIdentity},
		{name: "claimed resources.memory: a memory bomb is killed", run: testPartMemory},
		{name: "claimed resources.pids: a fork loop is bounded", run: testPartPids},
		{name: "claimed resources.cpu: a busy loop gets about its share", run: testPartCPU},
	}
}

// claims skips the test unless the backend enforces part on this host.
// A plain skip, not internal/testenv's: what a backend claims is its own
// statement, which a backend like local makes by design. CI fails on such
// a skip unless scripts/skips.allow names it for that backend's package,
// so a backend that stops claiming a part on the CI host fails CI.
func claims(t *testing.T, s *suite, part sandbox.Part) {
	t.Helper()
	if !slices.Contains(s.client(t).Enforces(), part) {
		t.Skipf("the backend does not claim %s on this host", part)
	}
}

func testPartFilesystem(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartFilesystem)
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, sess := s.session(t)
	res := sh(t, sess, "cat "+secret)
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "host data") {
		t.Fatalf("read the host file %s from inside: exit %d, stdout %q", secret, res.ExitCode, res.Stdout)
	}
}

func testPartReadOnly(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartReadOnlyPaths)
	var ws string
	_, sess := s.session(t, func(sp *sandbox.Spec) {
		ws = sp.Workspace
		plant(t, filepath.Join(ws, "in", "data.txt"), "original\n")
		sp.Policy.Filesystem.ReadOnly = []string{sandbox.DefaultWorkdir + "/in"}
	})
	res := sh(t, sess, "echo changed > in/data.txt; echo new > in/new.txt; rm -f in/data.txt; cat in/data.txt")
	if got := read(t, filepath.Join(ws, "in", "data.txt")); got != "original\n" {
		t.Errorf("the read-only file now holds %q (stderr %q)", got, res.Stderr)
	}
	if _, err := os.Lstat(filepath.Join(ws, "in", "new.txt")); err == nil {
		t.Errorf("a file was created in the read-only directory")
	}
	if string(res.Stdout) != "original\n" {
		t.Errorf("reading the read-only file gave %q, want it readable and unchanged", res.Stdout)
	}
}

func testPartDeny(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartDenyPaths)
	_, sess := s.session(t, func(sp *sandbox.Spec) {
		plant(t, filepath.Join(sp.Workspace, "secret", "key"), "hunter2\n")
		plant(t, filepath.Join(sp.Workspace, "token"), "s3cr3t\n")
		sp.Policy.Filesystem.Deny = []string{sandbox.DefaultWorkdir + "/secret", sandbox.DefaultWorkdir + "/token"}
	})
	res := sh(t, sess, "cat secret/key; cat token; ls secret")
	for _, leak := range []string{"hunter2", "s3cr3t", "key"} {
		if strings.Contains(string(res.Stdout), leak) {
			t.Errorf("a denied path leaked %q: stdout %q", leak, res.Stdout)
		}
	}
}

func testPartNetworkNone(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartNetworkNone)
	_, sess := s.session(t, func(sp *sandbox.Spec) { sp.Policy.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkNone} })
	if why, ok := s.cfg.skips[CapEmptyNetns]; ok {
		t.Logf("network none by policy (%s): the sandbox must reach no address of this host", why)
		testNoneReachesNoHostAddress(t, sess)
		return
	}
	// /proc/net/dev lists the interfaces of the network namespace.
	out := string(shOK(t, sess, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").Stdout)
	if got := strings.Fields(out); !slices.Equal(got, []string{"lo"}) {
		t.Errorf("interfaces inside = %q, want only lo", got)
	}
}

func testPartProcesses(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartProcesses)
	host, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	_, sess := s.session(t)
	out := string(shOK(t, sess, "ls -d /proc/[0-9]* | wc -l").Stdout)
	inside, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("count processes inside: %q", out)
	}
	// A fresh sandbox has its init, this shell and ls: a handful, while
	// the host running the tests has many more.
	if inside > 10 || inside >= len(host) {
		t.Errorf("%d processes visible inside (the host has %d): host processes are visible", inside, len(host))
	}
}

func testPartIdentity(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartIdentity)
	_, sess := s.session(t)
	status := string(shOK(t, sess, "cat /proc/self/status").Stdout)
	want := map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "NoNewPrivs": "1"}
	for line := range strings.SplitSeq(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		if w, ok := want[k]; ok {
			if strings.TrimSpace(v) != w {
				t.Errorf("%s = %s, want %s", k, strings.TrimSpace(v), w)
			}
			delete(want, k)
		}
	}
	for k := range want {
		t.Errorf("/proc/self/status has no %s line", k)
	}
}

func testPartMemory(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartMemory)
	_, sess := s.session(t, func(sp *sandbox.Spec) { sp.Policy.Resources.MemoryBytes = 64 << 20 })
	// The shell keeps a command substitution's whole output in memory:
	// 256 MiB of it, four times the limit.
	res := sh(t, sess, `x=$(head -c 268435456 /dev/zero | tr '\0' a); echo survived ${#x}`)
	if strings.Contains(string(res.Stdout), "survived") {
		t.Fatalf("the shell held 256 MiB under a 64 MiB limit: %q", res.Stdout)
	}
	if !res.OOMKilled && res.ExitCode != 137 {
		t.Errorf("the memory bomb ended with exit %d, OOMKilled=%t; want it reported killed", res.ExitCode, res.OOMKilled)
	}
}

func testPartPids(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartPids)
	const limit = 32
	_, sess := s.session(t, func(sp *sandbox.Spec) { sp.Policy.Resources.Pids = limit })
	res := sh(t, sess, `n=0; while [ $n -lt 200 ]; do sleep 1 >/dev/null 2>&1 & n=$((n+1)); done; echo started $n`)
	if strings.Contains(string(res.Stdout), "started 200") {
		t.Fatalf("200 background processes started under a limit of %d", limit)
	}
	// The session is usable again once the loop's processes are gone
	// (while they live, starting a command may itself need a process:
	// the start fails, with an error or a command's failure).
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := sandbox.Exec(ctx(t), sess, sandbox.ExecRequest{Cmd: []string{"sh", "-c", "true"}})
		if err == nil && res.ExitCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session still fails to run a command after the fork loop: exit %d, %q %q, %v", res.ExitCode, res.Stdout, res.Stderr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func testPartCPU(t *testing.T, s *suite) {
	claims(t, s, sandbox.PartCPU)
	_, sess := s.session(t, func(sp *sandbox.Spec) { sp.Policy.Resources.CPUs = 0.2 })
	// The shell spins for 600 ms of wall time, then reads the user and
	// system time of itself and of the children it waited for (fields 14
	// to 17 of /proc/PID/stat: the loop's date processes count), in clock
	// ticks of 1/100 s (USER_HZ, fixed by the kernel ABI; images need not
	// have getconf), and the wall time in the same ticks. At a fifth of a
	// core it gets about 120 ms of the 600.
	script := `start=$(date +%s%N); end=$((start+600000000))
	while [ $(date +%s%N) -lt $end ]; do :; done
	set -- $(cut -d' ' -f14-17 /proc/$$/stat)
	echo $(($1+$2+$3+$4)) $(( ($(date +%s%N)-start) / 10000000 ))`
	out := strings.Fields(string(shOK(t, sess, script).Stdout))
	if len(out) != 2 {
		t.Fatalf("output %q, want cpu and wall ticks", out)
	}
	cpu, err1 := strconv.Atoi(out[0])
	wall, err2 := strconv.Atoi(out[1])
	if err1 != nil || err2 != nil || wall == 0 {
		t.Fatalf("output %q, want cpu and wall ticks", out)
	}
	t.Logf("the loop used %d of %d ticks", cpu, wall)
	if float64(cpu) > 0.4*float64(wall) {
		t.Errorf("a busy loop limited to 0.2 cpus used %d of %d ticks (%.0f%%)", cpu, wall, 100*float64(cpu)/float64(wall))
	}
}

// plant writes a host file, creating its directory.
func plant(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// reachScript tries a TCP connect to each host:port argument, 2 seconds
// each, and prints the ones that connect or are reset (either is an
// open path).
const reachScript = `import socket, sys
for a in sys.argv[1:]:
    h, p = a.rsplit(":", 1)
    s = socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET)
    s.settimeout(2)
    try:
        s.connect((h, int(p)))
        print(a)
    except ConnectionRefusedError:
        print(a)
    except OSError:
        pass
    s.close()
`

// testNoneReachesNoHostAddress listens on every address of this host and
// checks that the sandbox connects to none of them, from either side.
func testNoneReachesNoHostAddress(t *testing.T, sess sandbox.Session) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && !ip.IP.IsLinkLocalUnicast() {
			targets = append(targets, net.JoinHostPort(ip.IP.String(), port))
		}
	}
	if len(targets) == 0 {
		t.Fatal("this host has no address but loopback to try")
	}
	res := shOK(t, sess, `exec python3 -c "$0" "$@"`, func(r *sandbox.ExecRequest) {
		r.Cmd = append(append(r.Cmd, reachScript), targets...)
	})
	if out := strings.Fields(string(res.Stdout)); len(out) > 0 {
		t.Errorf("the sandbox reached %v of this host's %v", out, targets)
	}
	select {
	case from := <-accepted:
		t.Errorf("this host accepted a connection from %s", from)
	default:
	}
}
