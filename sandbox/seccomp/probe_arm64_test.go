//go:build linux && arm64

package seccomp

// archProbe is never called: arm64 has no arch-only denials.
func archProbe(r rule) probe { panic("no arm64-only rules: " + r.name) }
