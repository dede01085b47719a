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
// What the proof trusts: the probe is the image's python3, run before any
// command of the session. An image built to lie (a python3 that prints
// "silent") can fake it, as silence can always be faked from inside; so
// the proof holds against a cluster that does not enforce, not against a
// hostile image on such a cluster. Probing from a container of the
// operator's image in the Pod's network namespace (an ephemeral
// container) would close that.
const (
	kubeletPort  = 10250
	controlLimit = 100 * time.Millisecond
	probeSilence = time.Second
	// enforceWithin bounds how long an enforcer may take to apply a new
	// policy (it learns the policy and the Pod's address from the API).
	enforceWithin = 10 * time.Second
)

// probeScript runs in the Pod: it tries one connect to $1:$2 with a
// timeout of $3 seconds, prints the outcome (open, silent, rejected ERRNO)
// and the microseconds it took, then waits for a line on stdin before the
// next try, until stdin ends.
const probeScript = `import socket, sys, time
host, port, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
while True:
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
    if not sys.stdin.readline():
        break
`

// probeArgv runs probeScript with python3, or says "no-python3".
func probeArgv(host string) []string {
	return []string{"/bin/sh", "-c", `command -v python3 >/dev/null 2>&1 || { echo no-python3; exit 0; }; exec python3 -c "$0" "$@"`,
		probeScript, host, strconv.Itoa(kubeletPort), strconv.FormatFloat(probeSilence.Seconds(), 'f', 3, 64)}
}

// errNotProved is why a policy could not be proved; the caller refuses
// network.none with it, or warns under AllowWeaker.
type errNotProved struct{ why string }

func (e *errNotProved) Error() string { return e.why }

// proveDenyAll writes the session's deny-all policy and proves it holds
// (see above). It returns *errNotProved when the proof fails, another
// error when the exec or the API does.
func (s *session) proveDenyAll(ctx context.Context, pod *corev1.Pod) error {
	host := pod.Status.HostIP
	if host == "" || net.ParseIP(host) == nil {
		return &errNotProved{fmt.Sprintf("the pod's node has no address to probe (hostIP %q)", host)}
	}
	target := net.JoinHostPort(host, strconv.Itoa(kubeletPort))
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
		err := s.stream(sctx, probeArgv(host), remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: &limitedWriter{w: &stderr, n: 4 << 10}})
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
			return "", 0, &errNotProved{"the image has no python3 to probe with"}
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

	r, control, err := next()
	if err != nil {
		return err
	}
	if r != "open" || control > controlLimit {
		return &errNotProved{fmt.Sprintf("before the policy, the pod's connect to its node's kubelet at %s gave %s in %s (want an answer within %s): there is nothing to prove the policy against", target, r, control.Round(time.Millisecond), controlLimit)}
	}
	if _, err := s.c.cs.NetworkingV1().NetworkPolicies(s.h.Namespace).Create(ctx, s.c.denyAll(s.id, s.spec.Detached), metav1.CreateOptions{}); err != nil {
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
				"control", control, "tries", tries, "since_written", time.Since(written))
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
