package nsinit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux/control"
)

// writeTrustBundle writes the system bundle followed by the egress
// proxy's CA to control.TrustBundle, atomically (a client reading it
// during a resume sees the old or the new one whole). The directory is
// the init's own tmpfs; nothing the sandbox controls is on the path.
func writeTrustBundle(caPEM string) error {
	if !strings.HasPrefix(caPEM, "-----BEGIN CERTIFICATE-----") {
		return fmt.Errorf("write %s: the CA is not a PEM certificate", control.TrustBundle)
	}
	// The sandbox sees the host's /etc/ssl and /etc/pki, bound in.
	bundle := sandbox.TrustBundle([]byte(caPEM))
	tmp, err := os.CreateTemp(control.TrustDir, ".bundle-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", control.TrustBundle, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(bundle); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", control.TrustBundle, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", control.TrustBundle, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", control.TrustBundle, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Clean(control.TrustBundle)); err != nil {
		return fmt.Errorf("write %s: %w", control.TrustBundle, err)
	}
	return nil
}
