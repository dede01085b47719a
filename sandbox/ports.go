package sandbox

import (
	"context"
	"fmt"
	"net"
	"slices"
)

// PortDialer is a session whose exposed ports (Spec.Ports) the host can
// connect to. A connection reaches 127.0.0.1:port inside the sandbox and
// nothing else: the sandbox's other ports, its other addresses and the
// host's network stay out of reach, in both directions.
//
// Backends implement it where they can reach into a session's network;
// use the package function DialPort, which checks that the port is
// exposed and says by name when a backend cannot.
type PortDialer interface {
	// DialPort connects to port on the sandbox's loopback. The port has
	// been checked against Spec.Ports; nothing listening there is
	// ErrNotFound.
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// DialPort connects to the exposed port of session s.
func DialPort(ctx context.Context, s Session, port int) (net.Conn, error) {
	const op = "dial port"
	st := s.State()
	if err := CheckExposed(st.Spec, port); err != nil {
		return nil, err
	}
	d, ok := s.(PortDialer)
	if !ok {
		return nil, Wrap(op, ErrUnsupported, fmt.Errorf("session %s: the %s backend cannot reach a port inside a session", s.ID(), st.Backend))
	}
	return d.DialPort(ctx, port)
}

// CheckPorts validates Spec.Ports: each a TCP port number, none twice.
// Backends call it from Create, before anything is made.
func CheckPorts(ports []int) error {
	seen := make(map[int]bool, len(ports))
	for _, p := range ports {
		if p < 1 || p > 65535 {
			return Errorf(ErrInvalid, "port %d: a TCP port is 1 to 65535", p)
		}
		if seen[p] {
			return Errorf(ErrInvalid, "port %d is listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

// CheckExposed refuses a port the session's spec does not expose, with
// the list it does, so the caller sees what to ask for instead.
func CheckExposed(spec Spec, port int) error {
	if slices.Contains(spec.Ports, port) {
		return nil
	}
	// Ports are fixed when a session is made: say so, and how.
	if len(spec.Ports) == 0 {
		return Errorf(ErrInvalid, "port %d is not exposed: the session exposes no ports, and ports are chosen at create (agentbox session create --port %d; Spec.Ports in Go)", port, port)
	}
	return Errorf(ErrInvalid, "port %d is not exposed: the session exposes %v, and ports are chosen at create (agentbox session create --port %d; Spec.Ports in Go)", port, spec.Ports, port)
}
