// Package testenv is the one place where a test states what its host must
// have (root, a Docker engine, a kernel feature, a program) and the one
// place that decides what happens when the host lacks it. On a
// developer's machine the test skips with the reason. In CI (CI=true),
// which is set up to run every test, it fails with the same reason: there
// a missing requirement is a broken CI set-up, and a skip would hide it.
//
// Skips that do not depend on the host stay plain t.Skip calls: -short
// (CI never passes it), a capability a backend does not claim by design
// (sandboxtest), and the parts of the rootless child run that need host
// root to set up. scripts/test.sh fails on every skip of the CI run that
// scripts/skips.allow does not list, so those are named there.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// CI reports whether this is a CI run (CI=true), where every test must
// run and a missing requirement fails the test.
func CI() bool { return os.Getenv("CI") == "true" }

// Skipf skips the test for a reason of the host, or fails it in CI.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("CI=true, so a test the host cannot run fails: "+format, args...)
	} else {
		t.Skipf(format, args...)
	}
}

// NeedRoot skips the test (fails it in CI) unless it runs as root; what
// names what needs root: NeedRoot(t, "mounting a tmpfs").
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skipf(t, "%s needs root (euid %d)", what, os.Geteuid())
	}
}

// NeedDocker skips the test (fails it in CI) when err, why no Docker
// engine answered, is not nil.
func NeedDocker(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		Skipf(t, "no Docker engine answers: %v", err)
	}
}

// NeedKernel skips the test (fails it in CI) when err, the result of
// probing the kernel for feature, is not nil.
func NeedKernel(t testing.TB, feature string, err error) {
	t.Helper()
	if err != nil {
		Skipf(t, "the kernel here has no %s: %v", feature, err)
	}
}

// NeedCommand returns the path of the program name, or skips the test
// (fails it in CI) when it is not installed (scripts/setup.sh installs
// what the tests use).
func NeedCommand(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skipf(t, "%s is not installed", name)
	}
	return p
}
