package linux

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// ScratchDir is a directory that goes with the process that made it, as
// its sessions do: the CLI materializes a manifest into one before the
// session that uses it as workspace exists, and a kill -9 of the CLI must
// not leave it behind. It is registered with this process's reaper
// before it is created, so no moment exists in which it is on disk and
// unregistered; the reaper removes it after ending the sessions, which
// may still use it.
type ScratchDir struct {
	// Path is the directory's absolute path.
	Path string
	once sync.Once
}

// NewScratchDir creates a directory named prefix and a random suffix in
// parent (os.TempDir() when empty), mode 0700, that is removed with this
// process unless Keep is called.
func NewScratchDir(parent, prefix string) (*ScratchDir, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	parent, err := filepath.Abs(parent)
	if err != nil {
		return nil, err
	}
	for range 10 {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		r := registration{Own: true, Dir: filepath.Join(parent, prefix+hex.EncodeToString(b[:]))}
		if err := register(r); err != nil {
			return nil, fmt.Errorf("make a scratch directory in %s: start the reaper that removes it with this process: %w", parent, err)
		}
		err := os.Mkdir(r.Dir, 0o700)
		if err == nil {
			return &ScratchDir{Path: r.Dir}, nil
		}
		// Not ours: it must not be removed with this process.
		withdraw(r)
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("make a scratch directory: %w", err)
		}
	}
	return nil, fmt.Errorf("make a scratch directory in %s: every name tried exists", parent)
}

// Remove removes the directory and its registration; later calls, and
// calls after Keep, do nothing.
func (d *ScratchDir) Remove() error {
	var err error
	d.once.Do(func() {
		err = os.RemoveAll(d.Path)
		withdraw(registration{Dir: d.Path})
	})
	return err
}

// Keep lets the directory outlive this process (the workspace of a
// detached session, which its own removal handles).
func (d *ScratchDir) Keep() {
	d.once.Do(func() { withdraw(registration{Dir: d.Path}) })
}
