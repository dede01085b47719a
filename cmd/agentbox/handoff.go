package main

// This package builds two programs (scripts/build.sh builds both):
//
//   - agentbox-full: every command and backend linked in;
//   - agentbox, built with the "lean" and "noegress" tags: the plain exec
//     with the linux and local backends (no manifest, snapshot or network
//     allow-list: see exec_workspace_lean.go). Every other command, and an
//     exec that needs more, hands off to agentbox-full beside it (execve,
//     same arguments, same environment).
//
// Why: a Go program runs the initialisers of every package it links before
// main. The agent harness, the Docker client and JSON-schema checks bring
// the OpenAI SDK, moby, OpenTelemetry, gRPC and a schema compiler that
// compiles its metaschemas at start: 30 ms before main on the machine
// bench/README.md reports, on every `agentbox exec`, for code exec never
// runs. The lean build starts in about 8 ms. A plain `go build
// ./cmd/agentbox` gives the full program under the name agentbox, which
// needs no companion.

// fullName is the full program's file name, looked up next to the lean
// one.
const fullName = "agentbox-full"

// handedOffEnv is set by the lean build in the environment of the
// agentbox-full it hands off to; the full build removes it first thing.
const handedOffEnv = "AGENTBOX_HANDED_OFF"

// fullOnlyBackends are the exec backends the lean build does not link.
var fullOnlyBackends = []string{"docker"}

// handOff, set by the lean build, replaces this process with
// agentbox-full run with the same arguments; what names the command for
// the error it returns when it cannot. Nil in the full build.
var handOff func(what string) error
