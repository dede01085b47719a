// Package docker is agentbox's Docker Engine backend: each session is one
// container on the engine DOCKER_HOST names, driven through the official
// Go client (github.com/moby/moby/client, API version negotiated down to
// the engine's; 1.40 is the oldest it speaks).
//
// A session container runs the image's /bin/sh as its init, sleeping,
// reaping and ignoring signals; commands arrive through the exec API
// (attach, stdin, TTY with resize). The container has a read-only root, the workspace bound
// read-write at the workdir, a /tmp tmpfs, no capabilities,
// no-new-privileges, a seccomp allow-list compiled from the native filter's
// policy (sandbox/seccomp), network mode none (or an internal network whose only
// reachable address is the egress proxy, egress.go), memory (swap equal
// to memory), pids and CPU limits, and the workspace directory's owner
// as the session user (owner.go: the engine cannot map ids, so that is how
// what commands create stays the owner's). Files in the workspace move
// through the host bind with
// openat2 RESOLVE_IN_ROOT (sandbox/wsfs); other paths are read through
// the container.
//
// Containers carry labels agentbox.session, agentbox.owner-pid,
// agentbox.owner-host and agentbox.created; GC removes the ones whose
// owner is gone or that are stopped. See README.md for images, limits and
// what is not enforced.
package docker
