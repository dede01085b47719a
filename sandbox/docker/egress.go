package docker

import (
	"context"
	"errors"

	"github.com/agentbox/agentbox/sandbox"
)

// egressAvailable says whether the allow-list egress proxy is wired into
// this backend. It is not yet: Enforces leaves network.allowlist out, so
// Create refuses it by name (ErrPolicyUnsupported) instead of running a
// container with a weaker network.
const egressAvailable = false

// attachEgress would put the container on an internal network whose only
// reachable address is the egress proxy. Until that exists it refuses.
func (c *Client) attachEgress(ctx context.Context, s *session, plan *containerPlan) (func(), error) {
	return nil, sandbox.Wrap("docker: create", sandbox.ErrPolicyUnsupported, errors.New("network.allowlist is not implemented by the docker backend"))
}
