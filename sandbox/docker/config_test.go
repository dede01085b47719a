package docker

import (
	"strings"
	"testing"
)

func TestTheSeccompProfileIsForTheEnginesArchitecture(t *testing.T) {
	tests := []struct {
		machine, goarch string
	}{
		{"x86_64", "amd64"},
		{"aarch64", "arm64"},
		{"arm64", "arm64"},
		{"riscv64", "riscv64"},
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			if got := engineGOARCH(tt.machine); got != tt.goarch {
				t.Errorf("engineGOARCH(%q) = %q, want %q", tt.machine, got, tt.goarch)
			}
		})
	}
	c := &Client{engine: engineInfo{arch: "arm64"}}
	if p, err := c.seccompProfile(); err != nil || !strings.Contains(p, `"SCMP_ARCH_AARCH64"`) {
		t.Errorf("profile for an arm64 engine: %.80s..., %v", p, err)
	}
}
