package nsinit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/sandbox/linux/control"
)

// systemBundles are where distributions keep the system's CA bundle, as
// the sandbox sees it (the host's /etc/ssl and /etc/pki are bound in).
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // Alpine, macOS-like layouts
}

// writeTrustBundle writes the system bundle followed by the egress
// proxy's CA to control.TrustBundle, atomically (a client reading it
// during a resume sees the old or the new one whole). The directory is
// the init's own tmpfs; nothing the sandbox controls is on the path.
func writeTrustBundle(caPEM string) error {
	if !strings.HasPrefix(caPEM, "-----BEGIN CERTIFICATE-----") {
		return fmt.Errorf("write %s: the CA is not a PEM certificate", control.TrustBundle)
	}
	var b bytes.Buffer
	for _, p := range systemBundles {
		sys, err := os.ReadFile(p)
		if err == nil && len(sys) > 0 {
			b.Write(sys)
			if !bytes.HasSuffix(sys, []byte("\n")) {
				b.WriteByte('\n')
			}
			break
		}
	}
	b.WriteString(caPEM)
	tmp, err := os.CreateTemp(control.TrustDir, ".bundle-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", control.TrustBundle, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b.Bytes()); err != nil {
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
