package seccomp

import (
	"slices"
	"strings"
)

// The system-call tables in zsyscalls.go come from the zsysnum_linux_*.go
// files of the golang.org/x/sys version in go.mod; gensyscalls' test fails
// when they differ from what it writes now.
//go:generate go run ./internal/gensyscalls -o zsyscalls.go

// syscallNr is one entry of a system-call table.
type syscallNr struct {
	name string
	nr   uint32
}

// syscallTable is a generated table, sorted by name. It is a slice, not a
// map, so that it is data in the binary: a map would be built at the start
// of every program that links this package (the CLI and the sandbox init
// among them).
type syscallTable []syscallNr

// lookup returns the number of the call named name.
func (t syscallTable) lookup(name string) (uint32, bool) {
	i, ok := slices.BinarySearchFunc(t, name, func(e syscallNr, name string) int { return strings.Compare(e.name, name) })
	if !ok {
		return 0, false
	}
	return t[i].nr, true
}
