package kube

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/agentbox/agentbox/sandbox"
)

// The proof that a session's deny-all NetworkPolicy holds. Nothing in the
// API says whether a cluster enforces NetworkPolicies, nor when an
// enforcer has applied a new one, so each network-none session proves its
// own before Create returns: from inside its Pod, a TCP connect to its
// node's kubelet (hostIP, port kubeletPort: every node serves it) is
// tried once before the policy exists, and must answer (a SYN-ACK, or a
// reset: either shows the path is open) within controlLimit; then the
// policy is written and the connect is tried again until it gets no
// answer within probeSilence, or is rejected (an ICMP error, EPERM).
//
// Silence is the only sign most enforcers give (they drop), and silence
// read as "blocked" is the unsafe mistake: so the control must have been
// fast (at most controlLimit, a tenth of probeSilence) moments before on
// the same path, from the same Pod. A target that does not answer the
// control proves nothing, and the part is refused.
//
// The probe runs in an ephemeral container of the Pod (its network
// namespace, not its processes) from the operator's image
// (Options.Image), with python3: silence can always be faked from inside,
// so the code that reports it must not be the session's image. The
// session container runs only its init meanwhile, without the
// capabilities to touch the network namespace's routes or filters. The
// client needs RBAC for pods/ephemeralcontainers and pods/attach; a
// cluster that refuses them gets network.none refused.
const (
	kubeletPort  = 10250
	controlLimit = 100 * time.Millisecond
	probeSilence = time.Second
	// enforceWithin bounds how long an enforcer may take to apply a new
	// policy (it learns the policy and the Pod's address from the API).
	enforceWithin = 10 * time.Second
)

// probeScript runs in the Pod: it reads the target ("host port") from
// the first line on stdin, then for each further line tries one connect
// to it with a timeout of $1 seconds and prints the outcome (open,
// silent, rejected ERRNO) and the microseconds it took. (The target comes
// on stdin because the container is added before the Pod is scheduled,
// when its node's address is not known yet.)
const probeScript = `import socket, sys, time
host, port = sys.stdin.readline().split()
port, limit = int(port), float(sys.argv[1])
while sys.stdin.readline():
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.settimeout(limit)
    t = time.monotonic()
    try:
        s.connect((host, port))
        r = "open"
    except ConnectionRefusedError:
        r = "open"
    except socket.timeout:
        r = "silent"
    except OSError as e:
        r = "rejected %d" % e.errno
    finally:
        s.close()
    print(r, int((time.monotonic() - t) * 1e6), flush=True)
`

// probeArgv runs probeScript with python3, or says "no-python3" when
// asked for the first probe.
func probeArgv() []string {
	return []string{"/bin/sh", "-c", `command -v python3 >/dev/null 2>&1 || { read -r _; read -r _; echo no-python3; exit 0; }; exec python3 -c "$0" "$@"`,
		probeScript, strconv.FormatFloat(probeSilence.Seconds(), 'f', 3, 64)}
}

// prober is the name of the ephemeral container that probes.
const prober = "agentbox-netproof"

// addProber adds the ephemeral container that runs the probe to pod: the
// operator's image (Options.Image), not the session's, so that what the
// proof runs is not the session's to choose; the session container's
// security context; and the Pod's network namespace, which is what is
// proved. It is added right after the Pod, so that the kubelet starts it
// with the Pod's containers; one that is not allowed (RBAC) is
// *errNotProved.
func (s *session) addProber(ctx context.Context, pod *corev1.Pod) error {
	op := "kube: add the network probe to pod " + pod.Name
	for {
		err := s.updateProber(ctx, pod)
		if !apierrors.IsConflict(err) {
			return err
		}
		// The scheduler bound the Pod meanwhile: again, from the Pod as
		// it is now.
		if pod, err = s.c.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return sandbox.Wrap(op, kindOf(err), err)
		}
	}
}

// updateProber writes the ephemeral container into pod.
func (s *session) updateProber(ctx context.Context, pod *corev1.Pod) error {
	op := "kube: add the network probe to pod " + pod.Name
	p := pod.DeepCopy()
	var sc *corev1.SecurityContext
	if len(p.Spec.Containers) > 0 && p.Spec.Containers[0].SecurityContext != nil {
		sc = p.Spec.Containers[0].SecurityContext.DeepCopy()
	}
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:            prober,
			Image:           s.c.opts.Image,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         probeArgv(),
			Env:             []corev1.EnvVar{{Name: "PATH", Value: defaultPath}},
			Stdin:           true,
			StdinOnce:       true,
			SecurityContext: sc,
		},
	})
	if _, err := s.c.cs.CoreV1().Pods(p.Namespace).UpdateEphemeralContainers(ctx, p.Name, p, metav1.UpdateOptions{}); err != nil {
		switch {
		case apierrors.IsConflict(err):
			return err
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
			return &errNotProved{fmt.Sprintf("no ephemeral container to probe from: %v", err)}
		}
		return sandbox.Wrap(op, kindOf(err), err)
	}
	return nil
}

// waitProber returns once the probe container of pod runs; one that
// cannot start is *errNotProved.
func (s *session) waitProber(ctx context.Context, p *corev1.Pod) error {
	op := "kube: start the network probe of pod " + p.Name
	for {
		cur, err := s.c.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return sandbox.Wrap(op, kindOf(err), err)
		}
		for _, st := range cur.Status.EphemeralContainerStatuses {
			if st.Name != prober {
				continue
			}
			switch {
			case st.State.Running != nil:
				return nil
			case st.State.Terminated != nil:
				t := st.State.Terminated
				return &errNotProved{fmt.Sprintf("the probe container (image %s) ended: %s (exit %d) %s", s.c.opts.Image, t.Reason, t.ExitCode, t.Message)}
			case st.State.Waiting != nil && st.State.Waiting.Reason != "" && st.State.Waiting.Reason != "ContainerCreating" && st.State.Waiting.Reason != "PodInitializing":
				w := st.State.Waiting
				return &errNotProved{fmt.Sprintf("the probe container (image %s) cannot start: %s %s", s.c.opts.Image, w.Reason, w.Message)}
			}
		}
		select {
		case <-ctx.Done():
			return sandbox.Wrap(op, sandbox.ErrTimeout, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errNotProved is why a policy could not be proved; the caller refuses
// network.none with it, or warns under AllowWeaker.
type errNotProved struct{ why string }

func (e *errNotProved) Error() string { return e.why }

// proveDenyAll (after addProber, once the Pod runs) writes the session's deny-all policy and proves it holds
// (see above). It returns *errNotProved when the proof fails, another
// error when the exec or the API does.
func (s *session) proveDenyAll(ctx context.Context, pod *corev1.Pod) error {
	host := pod.Status.HostIP
	if host == "" || net.ParseIP(host) == nil {
		return &errNotProved{fmt.Sprintf("the pod's node has no address to probe (hostIP %q)", host)}
	}
	target := net.JoinHostPort(host, strconv.Itoa(kubeletPort))
	t0 := time.Now()
	if err := s.waitProber(ctx, pod); err != nil {
		return err
	}
	started := time.Since(t0)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	var streamErr error
	finished := false
	wait := func() error {
		if !finished {
			streamErr, finished = <-done, true
		}
		return streamErr
	}
	go func() {
		err := s.attach(sctx, prober, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: &limitedWriter{w: &stderr, n: 4 << 10}})
		outW.CloseWithError(io.EOF)
		inR.Close()
		done <- err
	}()
	defer func() {
		// stdin's end ends the probe; a stream that hangs is cut.
		inW.Close()
		t := time.AfterFunc(5*time.Second, cancel)
		wait()
		t.Stop()
	}()
	lines := bufio.NewScanner(outR)
	next := func() (string, time.Duration, error) {
		if !lines.Scan() {
			err := wait()
			if err == nil {
				err = fmt.Errorf("the probe ended early: %s", strings.TrimSpace(stderr.String()))
			}
			return "", 0, sandbox.Wrap("kube: probe the network policy of pod "+pod.Name, sandbox.ErrUnavailable, err)
		}
		f := strings.Fields(lines.Text())
		if len(f) == 1 && f[0] == "no-python3" {
			return "", 0, &errNotProved{fmt.Sprintf("the probe's image %s has no python3", s.c.opts.Image)}
		}
		if len(f) < 2 {
			return "", 0, sandbox.Errorf(sandbox.ErrUnavailable, "kube: probe the network policy of pod %s: unexpected output %q", pod.Name, lines.Text())
		}
		us, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		return strings.Join(f[:len(f)-1], " "), time.Duration(us) * time.Microsecond, nil
	}
	ask := func() error {
		_, err := io.WriteString(inW, "\n")
		return err
	}

	if _, err := io.WriteString(inW, host+" "+strconv.Itoa(kubeletPort)+"\n"); err != nil {
		return sandbox.Wrap("kube: probe the network policy of pod "+pod.Name, sandbox.ErrUnavailable, err)
	}
	if err := ask(); err != nil {
		return sandbox.Wrap("kube: probe the network policy of pod "+pod.Name, sandbox.ErrUnavailable, err)
	}
	r, control, err := next()
	if err != nil {
		return err
	}
	if r != "open" || control > controlLimit {
		return &errNotProved{fmt.Sprintf("before the policy, the pod's connect to its node's kubelet at %s gave %s in %s (want an answer within %s): there is nothing to prove the policy against", target, r, control.Round(time.Millisecond), controlLimit)}
	}
	if _, err := s.c.cs.NetworkingV1().NetworkPolicies(s.h.Namespace).Create(ctx, s.policy(), metav1.CreateOptions{}); err != nil {
		return sandbox.Wrap("kube: create network policy", kindOf(err), err)
	}
	written := time.Now()
	deadline := written.Add(enforceWithin)
	for tries := 1; ; tries++ {
		if err := ask(); err != nil {
			return sandbox.Wrap("kube: probe the network policy of pod "+pod.Name, sandbox.ErrUnavailable, err)
		}
		r, _, err = next()
		if err != nil {
			return err
		}
		if r != "open" {
			s.c.log.Debug("kube: deny-all policy proved", "pod", pod.Name, "target", target, "outcome", r,
				"prober_start", started, "control", control, "tries", tries, "since_written", time.Since(written), "total", time.Since(t0))
			return nil
		}
		if time.Now().After(deadline) {
			return &errNotProved{fmt.Sprintf("%s after its deny-all NetworkPolicy was written, the pod still reaches its node's kubelet at %s: the cluster does not enforce NetworkPolicies", enforceWithin, target)}
		}
		select {
		case <-ctx.Done():
			return sandbox.Wrap("kube: probe the network policy of pod "+pod.Name, sandbox.ErrTimeout, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
