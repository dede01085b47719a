//go:build noegress

package linux

import (
	"errors"

	"github.com/agentbox/agentbox/sandbox"
)

// Built with the noegress tag, the backend has no egress proxy, and with
// it none of net/http and crypto/tls: what agentbox-init is built with
// (the proxy runs in the client process, never in the init) and what the
// lean CLI is built with (it hands sessions with an allow-list to
// agentbox-full). A network allow-list is then not among what the client
// enforces, so sandbox.Check refuses it before anything starts.
const networkAllowListAvailable = false

// egressBridge is never made without the proxy.
type egressBridge struct{}

func (s *session) startEgress(sandbox.NetworkPolicy) error {
	return &sandbox.Error{Op: "linux: egress", Kind: sandbox.ErrPolicyUnsupported,
		Err: errors.New("this build has no egress proxy (noegress); a network allow-list needs the full agentbox")}
}

func (s *session) stopEgress() {}

func (b *egressBridge) env() map[string]string    { return nil }
func (b *egressBridge) denialCount() int          { return 0 }
func (b *egressBridge) denialsSince(int) []string { return nil }
