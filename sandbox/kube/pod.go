package kube

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/agentbox/agentbox/sandbox"
)

// Labels every session Pod carries; GC selects on them.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "agentbox"
	labelSession   = "agentbox.session"
	labelHost      = "agentbox.owner-host"
	labelPid       = "agentbox.owner-pid"
	labelDetached  = "agentbox.detached"
	annotCreated   = "agentbox.created"
	container      = "session"
	// pidVolume holds the exec wrapper's pid files (pidDir).
	pidVolume = "agentbox-pids"
)

// initCmd is the container's first process: a shell that only sleeps,
// ignoring the signals a command could send it (as the docker backend's
// init does), and reaping the orphans the kernel gives it.
var initCmd = []string{"/bin/sh", "-c", "trap '' HUP INT QUIT TERM USR1 USR2 PIPE ALRM; while :; do sleep 2147483647; done"}

// defaultPath is PATH in the session when Spec.Env sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// podName is the Pod of session id.
func podName(id string) string { return "agentbox-" + id }

// parseUser reads Spec.User ("uid[:gid]"), default DefaultUID:DefaultGID.
func parseUser(user string) (uid, gid int64, err error) {
	if user == "" {
		return sandbox.DefaultUID, sandbox.DefaultGID, nil
	}
	u, g, hasGid := strings.Cut(user, ":")
	uid, err = strconv.ParseInt(u, 10, 32)
	if err != nil || uid < 0 {
		return 0, 0, sandbox.Errorf(sandbox.ErrInvalid, "kube: user %q: want uid[:gid]", user)
	}
	gid = uid
	if hasGid {
		if gid, err = strconv.ParseInt(g, 10, 32); err != nil || gid < 0 {
			return 0, 0, sandbox.Errorf(sandbox.ErrInvalid, "kube: user %q: want uid[:gid]", user)
		}
	}
	return uid, gid, nil
}

// sessionEnv is the whole environment of the session's commands: the
// spec's, with PATH and HOME when it sets none.
func sessionEnv(spec sandbox.Spec) map[string]string {
	env := map[string]string{"PATH": defaultPath, "HOME": "/tmp"}
	for k, v := range spec.Env {
		env[k] = v
	}
	return env
}

// podFor is the Pod of a session: see the package comment for what each
// field enforces.
func (c *Client) podFor(id string, spec sandbox.Spec, uid, gid int64) *corev1.Pod {
	f := false
	t := true
	workdir := spec.Workdir
	var env []corev1.EnvVar
	for k, v := range sessionEnv(spec) {
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	sort.Slice(env, func(i, j int) bool { return env[i].Name < env[j].Name })

	r := spec.Policy.Resources
	limits := corev1.ResourceList{}
	// Requests stay small so that a node holds many idle sessions; the
	// limits are the policy's ceilings.
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	if r.MemoryBytes > 0 {
		limits[corev1.ResourceMemory] = *resource.NewQuantity(r.MemoryBytes, resource.BinarySI)
		requests[corev1.ResourceMemory] = *resource.NewQuantity(min(r.MemoryBytes, 32<<20), resource.BinarySI)
	}
	if r.CPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(r.CPUs*1000), resource.DecimalSI)
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(min(int64(r.CPUs*1000), 10), resource.DecimalSI)
	}
	workspace := corev1.EmptyDirVolumeSource{}
	if r.DiskBytes > 0 {
		// A memory-backed emptyDir is a tmpfs of sizeLimit: a hard bound
		// (a disk-backed one is only measured and evicted). It counts
		// toward the container's memory, so the limit grows by as much.
		workspace = corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(r.DiskBytes, resource.BinarySI)}
		if r.MemoryBytes > 0 {
			limits[corev1.ResourceMemory] = *resource.NewQuantity(r.MemoryBytes+r.DiskBytes, resource.BinarySI)
		}
	}
	tmpLimit := resource.MustParse("64Mi")
	pidLimit := resource.MustParse("1Mi")
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	if c.opts.SeccompProfile != "" {
		seccomp = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &c.opts.SeccompProfile}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        podName(id),
			Namespace:   c.ns,
			Labels:      c.labels(id, spec.Detached),
			Annotations: map[string]string{annotCreated: time.Now().UTC().Format(time.RFC3339)},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			TerminationGracePeriodSeconds: ptr(int64(0)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &gid, RunAsNonRoot: &t,
				SeccompProfile: seccomp,
			},
			Containers: []corev1.Container{{
				Name:            container,
				Image:           spec.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         initCmd,
				WorkingDir:      workdir,
				Env:             env,
				Resources:       corev1.ResourceRequirements{Limits: limits, Requests: requests},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: &uid, RunAsGroup: &gid, RunAsNonRoot: &t,
					AllowPrivilegeEscalation: &f,
					ReadOnlyRootFilesystem:   &t,
					Privileged:               &f,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           seccomp,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: workdir},
					{Name: "tmp", MountPath: "/tmp"},
					{Name: pidVolume, MountPath: pidDir},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &workspace}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &tmpLimit}}},
				{Name: pidVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &pidLimit}}},
			},
		},
	}
	if c.opts.RuntimeClass != "" {
		pod.Spec.RuntimeClassName = &c.opts.RuntimeClass
	}
	if r.SessionTimeout > 0 {
		pod.Spec.ActiveDeadlineSeconds = ptr(int64(max(1, (r.SessionTimeout+time.Second-1)/time.Second)))
	}
	return pod
}

// labels are a session Pod's (and its NetworkPolicy's) labels.
func (c *Client) labels(id string, detached bool) map[string]string {
	host, _ := os.Hostname()
	l := map[string]string{
		labelManagedBy: managedBy,
		labelSession:   id,
		labelHost:      labelValue(host),
		labelPid:       strconv.Itoa(os.Getpid()),
	}
	if detached {
		l[labelDetached] = "true"
	}
	return l
}

// labelValue fits s to a label value (63 characters of [A-Za-z0-9._-]).
func labelValue(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch == '-' || ch == '_' || ch == '.' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.Trim(string(b), "-_.")
}

// denyAll is the NetworkPolicy of a session with network none: it selects
// the session's Pod and allows neither ingress nor egress.
func (c *Client) denyAll(id string, detached bool) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: podName(id), Namespace: c.ns, Labels: c.labels(id, detached)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelSession: id}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// policy is the session's NetworkPolicy: deny-all, but for the egress
// proxy when the session has an allow-list.
func (s *session) policy() *networkingv1.NetworkPolicy {
	np := s.c.denyAll(s.id, s.spec.Detached)
	if s.egress != nil {
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{s.egress.egressRule()}
	}
	return np
}

func ptr[T any](v T) *T { return &v }

// versionOf reads the gitVersion of the API server's /version answer.
func versionOf(raw []byte) string {
	var v version.Info
	if err := json.Unmarshal(raw, &v); err != nil || v.GitVersion == "" {
		return "(unknown version)"
	}
	return v.GitVersion
}

// describePod says why a Pod is not running, from its status.
func describePod(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	if p.Status.Reason != "" {
		parts = append(parts, p.Status.Reason+": "+p.Status.Message)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", cond.Type, cond.Message))
		}
	}
	for _, st := range p.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil {
			parts = append(parts, fmt.Sprintf("container %s waiting: %s %s", st.Name, w.Reason, w.Message))
		}
		if t := st.State.Terminated; t != nil {
			parts = append(parts, fmt.Sprintf("container %s terminated: %s (exit %d) %s", st.Name, t.Reason, t.ExitCode, t.Message))
		}
	}
	return strings.Join(parts, "; ")
}
