package kube

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentbox/agentbox/sandbox"
)

// These tests check what the backend asks of the cluster without one; the
// tests of kube_test.go (-tags kube) check that a real cluster does it.

func TestPodForUsesTheInstalledSeccompProfileWhenGiven(t *testing.T) {
	c := &Client{ns: "ns", opts: Options{SeccompProfile: "agentbox/profile.json"}}
	pod := c.podFor("abc", sandbox.Spec{Workdir: "/w"}, 1000, 1000)
	for what, sp := range map[string]*corev1.SeccompProfile{
		"pod": pod.Spec.SecurityContext.SeccompProfile, "container": pod.Spec.Containers[0].SecurityContext.SeccompProfile,
	} {
		if sp.Type != corev1.SeccompProfileTypeLocalhost || sp.LocalhostProfile == nil || *sp.LocalhostProfile != "agentbox/profile.json" {
			t.Errorf("%s seccomp profile %+v, want Localhost agentbox/profile.json", what, sp)
		}
	}
}

func TestPodForConfinesTheSession(t *testing.T) {
	c := &Client{ns: "ns", opts: Options{RuntimeClass: "gvisor"}}
	spec := sandbox.Spec{
		Image: "img", Workdir: "/w", Env: map[string]string{"A": "1"},
		Policy: sandbox.Policy{Resources: sandbox.Resources{
			MemoryBytes: 100 << 20, CPUs: 1.5, DiskBytes: 10 << 20, SessionTimeout: 1500 * time.Millisecond,
		}},
	}
	pod := c.podFor("abc", spec, 1234, 99)
	if pod.Name != "agentbox-abc" || pod.Namespace != "ns" || pod.Labels[labelSession] != "abc" || pod.Labels[labelManagedBy] != managedBy {
		t.Fatalf("meta: %+v", pod.ObjectMeta)
	}
	ps := pod.Spec
	if ps.RuntimeClassName == nil || *ps.RuntimeClassName != "gvisor" {
		t.Errorf("runtime class %v", ps.RuntimeClassName)
	}
	if ps.ActiveDeadlineSeconds == nil || *ps.ActiveDeadlineSeconds != 2 {
		t.Errorf("activeDeadlineSeconds %v, want 2 (1.5s rounded up)", ps.ActiveDeadlineSeconds)
	}
	if *ps.AutomountServiceAccountToken || *ps.EnableServiceLinks || ps.HostNetwork || ps.HostPID || ps.HostIPC {
		t.Errorf("the pod reaches host or cluster credentials: %+v", ps)
	}
	ctr := ps.Containers[0]
	sc := ctr.SecurityContext
	if *sc.RunAsUser != 1234 || *sc.RunAsGroup != 99 || !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation ||
		!*sc.ReadOnlyRootFilesystem || *sc.Privileged || sc.Capabilities.Drop[0] != "ALL" ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("security context %+v", sc)
	}
	if got := ctr.Resources.Limits.Memory().Value(); got != 110<<20 {
		t.Errorf("memory limit %d, want the policy's plus the workspace tmpfs", got)
	}
	if got := ctr.Resources.Limits.Cpu().MilliValue(); got != 1500 {
		t.Errorf("cpu limit %dm", got)
	}
	ws := ps.Volumes[0]
	if ws.Name != "workspace" || ws.EmptyDir.Medium != corev1.StorageMediumMemory || ws.EmptyDir.SizeLimit.Value() != 10<<20 {
		t.Errorf("workspace %+v", ws)
	}
	if ctr.VolumeMounts[0].MountPath != "/w" || ctr.WorkingDir != "/w" {
		t.Errorf("workdir %q, mounts %+v", ctr.WorkingDir, ctr.VolumeMounts)
	}
}

func TestDenyAllAllowsNothing(t *testing.T) {
	np := (&Client{ns: "ns"}).denyAll("abc", false)
	if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 || len(np.Spec.PolicyTypes) != 2 ||
		np.Spec.PodSelector.MatchLabels[labelSession] != "abc" {
		t.Fatalf("%+v", np.Spec)
	}
}

func TestExecArgvCarriesTheWholeEnvironment(t *testing.T) {
	s := &session{spec: sandbox.Spec{Workdir: "/w", Env: map[string]string{"A": "1", "PATH": "/p"}}}
	argv, err := s.execArgv(sandbox.ExecRequest{Cmd: []string{"ls", "-l"}, Workdir: "sub", Env: map[string]string{"B": "x y"}}, "t1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/bin/sh", "-c", wrapperScript, "agentbox-exec", "t1", "/w/sub", "A=1", "B=x y", "HOME=/tmp", "PATH=/p", "ls", "-l"}
	if strings.Join(argv, "|") != strings.Join(want, "|") {
		t.Fatalf("argv\n%q\nwant\n%q", argv, want)
	}
	if _, err := s.execArgv(sandbox.ExecRequest{Cmd: []string{"A=B"}}, "t"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a program name env would read as a variable: err = %v", err)
	}
}

func TestParseListReadsFindOutput(t *testing.T) {
	out := "b\x004\x00644\x001700000000.5\x00f\x00\x00" +
		"a\x004096\x002755\x001700000000\x00d\x00\x00" +
		"l\x001\x00777\x001700000000\x00l\x00b\x00"
	list, err := parseList("list", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].Name != "a" || list[1].Name != "b" || list[2].Name != "l" {
		t.Fatalf("not sorted: %+v", list)
	}
	if !list[0].IsDir || list[0].Mode != fs.ModeDir|fs.ModeSetgid|0o755 {
		t.Errorf("a: %+v", list[0])
	}
	if list[1].Size != 4 || list[1].Mode != 0o644 || list[1].ModTime.UnixMilli() != 1700000000500 {
		t.Errorf("b: %+v", list[1])
	}
	if list[2].Mode&fs.ModeSymlink == 0 || list[2].Target != "b" {
		t.Errorf("l: %+v", list[2])
	}
	if _, err := parseList("list", []byte("x\x001\x00")); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("a short listing: err = %v", err)
	}
}

func TestCopyTarBoundsFileSizes(t *testing.T) {
	var src bytes.Buffer
	tw := tar.NewWriter(&src)
	for _, name := range []string{"./", "./a", "./b"} {
		h := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: 600, PAXRecords: map[string]string{"AGENTBOX.sha256": "x"}}
		if name == "./" {
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(bytes.Repeat([]byte("z"), int(h.Size)))
	}
	tw.Close()

	var dst bytes.Buffer
	if err := copyTar(&dst, bytes.NewReader(src.Bytes()), 1000, false); !errors.Is(err, sandbox.ErrInvalid) || !strings.Contains(err.Error(), "disk limit") {
		t.Fatalf("1200 bytes of files under a 1000-byte limit: err = %v", err)
	}
	dst.Reset()
	if err := copyTar(&dst, bytes.NewReader(src.Bytes()), 1200, true); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&dst)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(h.PAXRecords) != 0 {
			t.Errorf("%s kept PAX records %v", h.Name, h.PAXRecords)
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, ",") != "./a,./b" {
		t.Fatalf("entries %v, want the files without the root", names)
	}
}

func TestParseUser(t *testing.T) {
	for in, want := range map[string][2]int64{"": {1000, 1000}, "5": {5, 5}, "5:6": {5, 6}} {
		u, g, err := parseUser(in)
		if err != nil || u != want[0] || g != want[1] {
			t.Errorf("parseUser(%q) = %d, %d, %v", in, u, g, err)
		}
	}
	for _, bad := range []string{"x", "-1", "1:x", "1:"} {
		if _, _, err := parseUser(bad); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("parseUser(%q): err = %v", bad, err)
		}
	}
}

func TestParseOOMCounts(t *testing.T) {
	for _, tc := range []struct {
		out         string
		before, now int64
		unreadable  bool
	}{
		{out: "0 1\n", before: 0, now: 1},
		{out: "-1 3\n", before: -1, now: 3},
		{out: "2 -1\n", before: 2, now: -1},
		{out: "", unreadable: true},
		{out: "x 1\n", unreadable: true},
		{out: "1 2 3\n", unreadable: true},
	} {
		before, now, err := parseOOMCounts(tc.out)
		if (err != nil) != tc.unreadable || (err == nil && (before != tc.before || now != tc.now)) {
			t.Errorf("parseOOMCounts(%q) = %d, %d, %v", tc.out, before, now, err)
		}
	}
}

func TestTerminatedByOOMReadsTheStateAndTheLastOne(t *testing.T) {
	oom := &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}
	other := &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 137}
	for _, tc := range []struct {
		name string
		cs   corev1.ContainerStatus
		want bool
	}{
		{"terminated by the OOM killer", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: oom}}, true},
		{"last terminated by it", corev1.ContainerStatus{LastTerminationState: corev1.ContainerState{Terminated: oom}}, true},
		{"terminated otherwise", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: other}}, false},
		{"running", corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, false},
	} {
		if got := terminatedByOOM(tc.cs); got != tc.want {
			t.Errorf("%s: %t", tc.name, got)
		}
	}
}
