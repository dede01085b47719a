// Package datadir says where agentbox keeps its data on the host. It is a
// leaf (it imports only the standard library) so that the lean CLI can
// name the default snapshot store without linking the snapshot package.
package datadir

import (
	"os"
	"path/filepath"
)

// Snapshots is the snapshot store used when none is named:
// $AGENTBOX_HOME/snapshots, else /var/lib/agentbox/snapshots for root,
// else $XDG_DATA_HOME/agentbox/snapshots or
// ~/.local/share/agentbox/snapshots.
func Snapshots() string {
	if h := os.Getenv("AGENTBOX_HOME"); h != "" {
		return filepath.Join(h, "snapshots")
	}
	if os.Geteuid() == 0 {
		return "/var/lib/agentbox/snapshots"
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "agentbox", "snapshots")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "agentbox", "snapshots")
	}
	return filepath.Join(os.TempDir(), "agentbox-snapshots")
}
