package snapshot

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/bytesize"
)

// Limits bound what a snapshot may hold, so that a hostile manifest or
// archive cannot exhaust the disk, memory or inodes of the host that
// restores or imports it. Zero fields take the defaults below.
type Limits struct {
	// MaxEntries caps files, directories and symlinks together.
	MaxEntries int64
	// MaxTotalBytes caps the sum of file sizes.
	MaxTotalBytes int64
	// MaxExpansionRatio caps, during Import, the bytes produced per byte
	// read from the archive stream (after a slack of ExpansionSlack bytes),
	// which stops compressed and sparse-file bombs early.
	MaxExpansionRatio int64
	// ExpansionSlack is how many bytes may be produced before the ratio is
	// enforced, so that small archives of empty or tiny files import.
	ExpansionSlack int64
}

// Default limits: generous for real workspaces, far below what would hurt
// a host.
const (
	DefaultMaxEntries        = 1 << 20 // about a million entries
	DefaultMaxTotalBytes     = 64 << 30
	DefaultMaxExpansionRatio = 200
	DefaultExpansionSlack    = 16 << 20
)

// DefaultLimits are the limits applied when Options.Limits is zero.
var DefaultLimits = Limits{
	MaxEntries:        DefaultMaxEntries,
	MaxTotalBytes:     DefaultMaxTotalBytes,
	MaxExpansionRatio: DefaultMaxExpansionRatio,
	ExpansionSlack:    DefaultExpansionSlack,
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if l.MaxExpansionRatio <= 0 {
		l.MaxExpansionRatio = DefaultMaxExpansionRatio
	}
	if l.ExpansionSlack <= 0 {
		l.ExpansionSlack = DefaultExpansionSlack
	}
	return l
}

// checkBound refuses total bytes of what (the files of a tree, a
// snapshot) over max, a session's disk limit, when max is positive.
// Holes count: a workspace of sparse files whose sizes pass the limit is
// not one a session of that limit could be given back.
func checkBound(what string, total, max int64) error {
	if max > 0 && total > max {
		return fmt.Errorf("%s total %s (sparse files at their full size), over the %s its session's workspace may hold (its disk limit)", what, bytesize.Format(total), bytesize.Format(max))
	}
	return nil
}
