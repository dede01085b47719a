package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/agentbox/agentbox/sandbox"
)

// DirStore is a TEST DOUBLE of sandbox.SnapshotStore: each snapshot is a
// plain copy of the tree in a directory under Root. It does no hashing, no
// atomic publication and no verification; use the snapshot package for
// real stores.
type DirStore struct {
	Root string
}

// NewDirStore returns a DirStore keeping its copies under root (pass
// t.TempDir()).
func NewDirStore(root string) *DirStore { return &DirStore{Root: root} }

// Save copies dir (regular files, directories and symlinks, with their
// modes, and owners when running as root) minus exclude, refusing a tree
// whose file sizes total more than maxBytes (when positive).
func (s *DirStore) Save(ctx context.Context, dir string, exclude []string, maxBytes int64) (string, error) {
	if err := checkBytes("dirstore: save "+dir, dir, exclude, maxBytes); err != nil {
		return "", err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	ref := "dirstore-" + hex.EncodeToString(b[:])
	if err := copyTree(ctx, dir, filepath.Join(s.Root, ref), exclude); err != nil {
		return "", fmt.Errorf("dirstore: save %s: %w", dir, err)
	}
	return ref, nil
}

// Restore copies snapshot ref into dir, which must be empty or absent,
// refusing one whose file sizes total more than maxBytes (when positive).
func (s *DirStore) Restore(ctx context.Context, ref, dir string, maxBytes int64) error {
	if ref == "" || filepath.Base(ref) != ref || ref[0] == '.' {
		return sandbox.Errorf(sandbox.ErrInvalid, "dirstore: bad snapshot reference %q", ref)
	}
	src := filepath.Join(s.Root, ref)
	if _, err := os.Stat(src); err != nil {
		return sandbox.Wrap("dirstore: restore "+ref, sandbox.ErrNotFound, err)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, "dirstore: restore %s: %s is not empty", ref, dir)
	}
	if err := checkBytes("dirstore: restore "+ref, src, nil, maxBytes); err != nil {
		return err
	}
	if err := copyTree(ctx, src, dir, nil); err != nil {
		return fmt.Errorf("dirstore: restore %s into %s: %w", ref, dir, err)
	}
	return nil
}

// copyTree copies src to dst. A file removed while it walks (src is a
// running session's workspace) is left out, as the snapshot package does.
func copyTree(ctx context.Context, src, dst string, exclude []string) error {
	asRoot := os.Geteuid() == 0
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return goneIsNil(err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if slices.Contains(exclude, filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return goneIsNil(err)
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
			err = os.Chmod(target, fi.Mode().Perm())
		case fi.Mode()&fs.ModeSymlink != 0:
			var link string
			if link, err = os.Readlink(p); err == nil {
				err = os.Symlink(link, target)
			}
		case fi.Mode().IsRegular():
			err = copyFile(p, target, fi.Mode().Perm())
		default:
			return nil // devices, sockets, FIFOs are not workspace content
		}
		if err == nil && asRoot {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				err = os.Lchown(target, int(st.Uid), int(st.Gid))
			}
		}
		return goneIsNil(err)
	})
}

// goneIsNil is err, or nil when it says a file no longer exists.
func goneIsNil(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(perm); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkBytes refuses a tree whose regular files total more than max bytes
// (apparent sizes), as sandbox.SnapshotStore asks.
func checkBytes(op, root string, exclude []string, max int64) error {
	if max <= 0 {
		return nil
	}
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return goneIsNil(err)
		}
		rel, _ := filepath.Rel(root, p)
		if slices.Contains(exclude, filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return goneIsNil(err)
			}
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		return sandbox.Wrap(op, nil, err)
	}
	if total > max {
		return sandbox.Errorf(sandbox.ErrInvalid, "%s: its files total %d bytes, over the %d its session's workspace may hold (its disk limit)", op, total, max)
	}
	return nil
}
