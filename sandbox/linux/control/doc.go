// Package control is what crosses between the native backend's two
// sides: the host client (package linux) and the session's init, pid 1
// inside the sandbox (package nsinit). It holds the init's start-up
// arguments and configuration, the descriptor numbers the init is
// started with, and the control protocol: one JSON object per
// SOCK_SEQPACKET packet, file descriptors as SCM_RIGHTS. Nothing else
// crosses, so this package is the whole of the interface between a
// process outside the namespaces and one inside.
package control
