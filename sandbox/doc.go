// Package sandbox is agentbox's backend-neutral contract: a Client creates,
// resumes and deletes sandbox Sessions; a Session runs commands and moves
// files; a Policy says what the sandbox may touch, and every backend either
// enforces each part of it or refuses it by name.
//
// This package holds no backend code. Backends live in sub-packages
// (linux, docker, local, remote) and all pass sandboxtest, the conformance
// suite.
package sandbox
