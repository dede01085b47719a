package sandbox

import (
	"bytes"
	"os"
)

// SystemCABundles are where distributions keep the system's CA bundle,
// most common first.
var SystemCABundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // Alpine, BSD-like layouts
}

// TrustBundle is the system bundle of this filesystem (the first of
// SystemCABundles that is not empty; none if there is none) followed by
// extra, a PEM certificate: what a sandbox whose egress proxy inspects
// TLS must trust.
func TrustBundle(extra []byte) []byte {
	var b bytes.Buffer
	for _, p := range SystemCABundles {
		sys, err := os.ReadFile(p)
		if err == nil && len(sys) > 0 {
			b.Write(sys)
			if !bytes.HasSuffix(sys, []byte("\n")) {
				b.WriteByte('\n')
			}
			break
		}
	}
	b.Write(extra)
	return b.Bytes()
}
