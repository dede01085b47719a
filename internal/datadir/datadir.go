// Package datadir says where agentbox keeps its data on the host. It is a
// leaf (it imports only the standard library) so that the lean CLI can
// name the defaults without linking the packages that use them.
package datadir

import (
	"os"
	"path/filepath"
	"strconv"
)

// Dir is agentbox's data directory: $AGENTBOX_HOME, else /var/lib/agentbox
// for root, else $XDG_DATA_HOME/agentbox or ~/.local/share/agentbox.
func Dir() string {
	if h := os.Getenv("AGENTBOX_HOME"); h != "" {
		return h
	}
	if os.Geteuid() == 0 {
		return "/var/lib/agentbox"
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "agentbox")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "agentbox")
	}
	return filepath.Join(os.TempDir(), "agentbox-"+strconv.Itoa(os.Geteuid()))
}

// Snapshots is the snapshot store used when none is named.
func Snapshots() string { return filepath.Join(Dir(), "snapshots") }

// Sessions is where the CLI keeps the state of the sessions it created
// detached (agentbox session create), one file per session.
func Sessions() string { return filepath.Join(Dir(), "sessions") }
