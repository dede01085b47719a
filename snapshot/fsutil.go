package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// flockCtx takes a flock, polling so that ctx can end the wait.
func flockCtx(ctx context.Context, fd, how int) error {
	delay := time.Millisecond
	for {
		err := unix.Flock(fd, how|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// syncDir fsyncs a directory, making the names in it durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// syncFS flushes the store's file system unless the store is a test's
// that opted out.
func (s *Store) syncFS(dir string) error {
	if s.noSync {
		return nil
	}
	return syncFS(dir)
}

// syncFS flushes the whole file system holding dir (syncfs(2)): one call
// makes every file a save wrote durable, instead of one fsync per file.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}

// writeFileDurable writes data to dst through a temporary file in tmpDir
// (same file system): write, fsync, rename, fsync dst's directory. A crash
// leaves either the old state or the whole new file, never a part.
func writeFileDurable(tmpDir, dst string, data []byte) error {
	f, err := os.CreateTemp(tmpDir, ".write-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	ok = true
	return syncDir(filepath.Dir(dst))
}
