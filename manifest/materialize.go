package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/atfile"
	"github.com/agentbox/agentbox/internal/fsmode"
	"github.com/agentbox/agentbox/sandbox"
	"golang.org/x/sys/unix"
)

// MaterializeOptions say how to write a manifest into a workspace.
type MaterializeOptions struct {
	// Base is the trusted base directory, as for Validate.
	Base string
	// Trusted is as for Validate: an untrusted manifest is refused if it
	// carries grants or reaches outside Base.
	Trusted bool
	// UID and GID own everything written; -1 keeps the writer's own id.
	// Note that 0 means root: pass sandbox.DefaultUID/DefaultGID (or the
	// run_as user's ids) for an unprivileged sandbox user.
	UID, GID int
	// Progress, when set, is told the bytes copied so far and the total
	// expected (files, copies; git clones are not counted ahead).
	Progress func(done, total int64)
}

// Materialized is what a session needs besides the written workspace.
type Materialized struct {
	// Root is the workspace's path in the sandbox.
	Root string
	// Mounts are the manifest's mount entries, Target = Root + "/" + path.
	// Their mount points exist (empty) in the workspace.
	Mounts []sandbox.Mount
	// Env is the manifest's environment (a copy).
	Env map[string]string
	// User is "uid:gid" of run_as, or "" for the backend's default.
	User string
	// Files and Bytes count what was written (git clones excluded).
	Files int
	Bytes int64
}

// Materialize validates the manifest, then writes its files, dirs, local
// copies and git clones into the host workspace directory dir (which must
// exist). Sources are opened without following links and copied by
// descriptor; destinations are created exclusively under descriptors of
// their parents, so neither side can be redirected by a symlink swapped in
// after validation. On failure everything written is removed again.
func (m *Manifest) Materialize(ctx context.Context, dir string, opts MaterializeOptions) (*Materialized, error) {
	p, err := m.validate(ValidateOptions{Base: opts.Base, Trusted: opts.Trusted})
	if err != nil {
		return nil, err
	}
	if testHookAfterValidate != nil {
		testHookAfterValidate()
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, sandbox.Wrap("manifest: materialize into "+dir, sandbox.ErrNotFound, err)
	}
	rootFD, err := openDirNoFollow(real)
	if err != nil {
		return nil, sandbox.Wrap("manifest: materialize into "+dir, sandbox.ErrInvalid, err)
	}
	defer unix.Close(rootFD)
	w := &writer{ctx: ctx, root: rootFD, dir: real, own: owner{opts.UID, opts.GID}, total: p.total, progress: opts.Progress}
	out := &Materialized{Root: p.root, Env: map[string]string{}, User: m.runAsUser()}
	for k, v := range m.Env {
		out.Env[k] = v
	}
	for _, e := range p.entries {
		if err := ctx.Err(); err != nil {
			w.cleanup()
			return nil, sandbox.Wrap("manifest: materialize", nil, err)
		}
		if err := w.entry(e); err != nil {
			w.cleanup()
			return nil, &sandbox.Error{Op: "manifest: materialize " + entryWhere(e.path), Kind: kindOf(err), Err: err}
		}
		if e.entry.Mount != nil {
			out.Mounts = append(out.Mounts, sandbox.Mount{Source: e.src, Target: p.root + "/" + e.path, ReadOnly: e.entry.Mount.IsReadOnly()})
		}
	}
	out.Files, out.Bytes = w.files, w.done
	return out, nil
}

// RunAsIDs are the uid and gid of the run_as user; ok is false when
// run_as is unset or names no user. Callers pass them as
// MaterializeOptions.UID/GID so the workspace belongs to that user.
func (m *Manifest) RunAsIDs() (uid, gid int, ok bool) {
	u, found := m.user(m.RunAs)
	if m.RunAs == "" || !found {
		return -1, -1, false
	}
	return u.UID, u.GID, true
}

// runAsUser is run_as as "uid:gid", "" when unset.
func (m *Manifest) runAsUser() string {
	u, ok := m.user(m.RunAs)
	if m.RunAs == "" || !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d", u.UID, u.GID)
}

// kindOf picks the sandbox error kind an underlying error deserves.
func kindOf(err error) error {
	var se *sandbox.Error
	switch {
	case errors.As(err, &se) && se.Kind != nil:
		return nil // already carries one
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR), errors.Is(err, errLinkEscape):
		return sandbox.ErrPathEscape
	case errors.Is(err, fs.ErrNotExist):
		return sandbox.ErrNotFound
	}
	return nil
}

// testHookAfterValidate lets tests swap files between validation and copy.
var testHookAfterValidate func()

var errLinkEscape = errors.New("symlink leaves the copied tree")

// writer writes entries under the workspace's descriptor and remembers
// what it created, to remove it on failure.
type writer struct {
	ctx      context.Context
	root     int
	dir      string
	own      owner
	created  []string // workspace-relative, in creation order
	files    int
	done     int64
	total    int64
	progress func(done, total int64)
	lastTick int64
}

// cleanup removes what was created, newest first.
func (w *writer) cleanup() {
	for i := len(w.created) - 1; i >= 0; i-- {
		_ = os.RemoveAll(filepath.Join(w.dir, w.created[i]))
	}
	w.created = nil
}

// parent opens (creating as needed, mode 0755) the parent directory of
// rel and returns its descriptor and rel's last component.
func (w *writer) parent(rel string) (int, string, error) {
	fd, err := unix.Dup(w.root)
	if err != nil {
		return -1, "", err
	}
	parts := strings.Split(rel, "/")
	for i, c := range parts[:len(parts)-1] {
		sub := strings.Join(parts[:i+1], "/")
		next, err := unix.Openat(fd, c, dirFlags, 0)
		if errors.Is(err, unix.ENOENT) {
			next, err = mkdirAt(fd, c, 0o755, w.own, sub)
			if err == nil {
				w.created = append(w.created, sub)
			}
		} else if err != nil {
			err = fmt.Errorf("open %s without following links: %w", sub, noFollowErr(err))
		}
		unix.Close(fd)
		if err != nil {
			return -1, "", err
		}
		fd = next
	}
	return fd, parts[len(parts)-1], nil
}

func (w *writer) entry(e planned) error {
	dir, name, err := w.parent(e.path)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	switch {
	case e.entry.File != nil:
		f := e.entry.File
		return w.writeFile(dir, name, e.path, orDefault(f.Mode, 0o644), strings.NewReader(f.Content))
	case e.entry.Dir != nil, e.entry.Mount != nil:
		mode := fs.FileMode(0o755)
		if e.entry.Dir != nil {
			mode = orDefault(e.entry.Dir.Mode, 0o755)
		}
		fd, err := mkdirAt(dir, name, mode, w.own, e.path)
		if errors.Is(err, unix.EEXIST) {
			// A dir created earlier as a parent, or already in the
			// workspace: keep it, but never accept a link or a file.
			fd, err = unix.Openat(dir, name, dirFlags, 0)
			if err != nil {
				return fmt.Errorf("%s exists and is not a directory: %w", e.path, noFollowErr(err))
			}
			unix.Close(fd)
			return nil
		}
		if err != nil {
			return err
		}
		w.created = append(w.created, e.path)
		unix.Close(fd)
		return nil
	case e.entry.LocalFile != nil:
		src, err := openFileNoFollow(e.src)
		if err != nil {
			return err
		}
		defer src.Close()
		mode := fs.FileMode(e.entry.LocalFile.Mode)
		if mode == 0 {
			fi, err := src.Stat()
			if err != nil {
				return err
			}
			mode = fi.Mode().Perm()
		}
		return w.writeFile(dir, name, e.path, mode, src)
	case e.entry.LocalDir != nil:
		return w.copyDir(dir, name, e)
	case e.entry.GitRepo != nil:
		return w.gitClone(dir, name, e)
	}
	return fmt.Errorf("entry has no kind")
}

func orDefault(m Mode, def fs.FileMode) fs.FileMode {
	if m == 0 {
		return def
	}
	return m.Perm()
}

// writeFile creates rel exclusively and copies r into it.
func (w *writer) writeFile(dir int, name, rel string, mode fs.FileMode, r io.Reader) error {
	dst, err := createAt(dir, name, mode, w.own, rel)
	if err != nil {
		return err
	}
	w.created = append(w.created, rel)
	_, err = io.Copy(dst, &progressReader{r: r, w: w})
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	w.files++
	return nil
}

// copyDir copies the tree at e.src into name under dir, then checks that
// every symlink copied stays inside the new tree (the copy is ours, so
// this check cannot be raced by the source changing).
func (w *writer) copyDir(dir int, name string, e planned) error {
	src, err := openDirNoFollow(e.src)
	if err != nil {
		return err
	}
	defer unix.Close(src)
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return err
	}
	dst, err := mkdirAt(dir, name, 0o700, w.own, e.path)
	if err != nil {
		return err
	}
	w.created = append(w.created, e.path)
	defer unix.Close(dst)
	var links []string
	if err := w.copyTree(src, dst, e.src, e.path, "", &links); err != nil {
		return err
	}
	if err := unix.Fchmod(dst, st.Mode&0o777); err != nil {
		return fmt.Errorf("chmod %s: %w", e.path, err)
	}
	tree := filepath.Join(w.dir, e.path)
	for _, l := range links {
		if msg := linkEscapes(tree, l); msg != "" {
			return fmt.Errorf("%w: %s/%s %s", errLinkEscape, e.path, l, msg)
		}
	}
	return nil
}

// copyTree copies the directory src into dst, entry by entry, by
// descriptor. rel is the path below the copied tree's root.
func (w *writer) copyTree(src, dst int, srcRoot, dstRoot, rel string, links *[]string) error {
	names, err := atfile.Names(src)
	if err != nil {
		return fmt.Errorf("list %s: %w", filepath.Join(srcRoot, rel), err)
	}
	for _, n := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		r := path.Join(rel, n)
		srcShow, dstShow := filepath.Join(srcRoot, r), path.Join(dstRoot, r)
		var st unix.Stat_t
		if err := unix.Fstatat(src, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("stat %s: %w", srcShow, err)
		}
		perm := fs.FileMode(st.Mode & 0o777)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			sub, err := unix.Openat(src, n, dirFlags, 0)
			if err != nil {
				return fmt.Errorf("open %s without following links: %w", srcShow, noFollowErr(err))
			}
			dsub, err := mkdirAt(dst, n, 0o700, w.own, dstShow)
			if err == nil {
				err = w.copyTree(sub, dsub, srcRoot, dstRoot, r, links)
				if err == nil {
					if cerr := unix.Fchmod(dsub, uint32(perm)); cerr != nil {
						err = fmt.Errorf("chmod %s: %w", dstShow, cerr)
					}
				}
				unix.Close(dsub)
			}
			unix.Close(sub)
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			f, err := openRegularAt(src, n, srcShow)
			if err != nil {
				return err
			}
			err = w.writeFileNoTrack(dst, n, dstShow, perm, f)
			f.Close()
			if err != nil {
				return err
			}
		case unix.S_IFLNK:
			target, err := atfile.Readlink(src, n)
			if err != nil {
				return fmt.Errorf("readlink %s: %w", srcShow, err)
			}
			if err := unix.Symlinkat(target, dst, n); err != nil {
				return fmt.Errorf("symlink %s: %w", dstShow, err)
			}
			if err := w.own.applyLink(dst, n, dstShow); err != nil {
				return err
			}
			*links = append(*links, r)
		default:
			return fmt.Errorf("%s is a %s now; only regular files, directories and symlinks are copied", srcShow, fsmode.Describe(fsmode.FromStat(st.Mode)))
		}
	}
	return nil
}

// writeFileNoTrack is writeFile for files inside a tree whose root is
// already tracked for cleanup.
func (w *writer) writeFileNoTrack(dir int, name, rel string, mode fs.FileMode, r io.Reader) error {
	n := len(w.created)
	err := w.writeFile(dir, name, rel, mode, r)
	w.created = w.created[:n]
	return err
}

// gitClone clones into name under dir, addressing the parent through this
// process's descriptor so the clone lands where validation looked.
func (w *writer) gitClone(dir int, name string, e planned) error {
	if _, err := lookGit(); err != nil {
		return err
	}
	dest := fmt.Sprintf("/proc/%d/fd/%d/%s", os.Getpid(), dir, name)
	w.created = append(w.created, e.path)
	g := e.entry.GitRepo
	if err := clone(w.ctx, e.url, g.Ref, dest, time.Duration(g.Timeout)); err != nil {
		return fmt.Errorf("clone %s: %w", displayURL(g.URL), err)
	}
	fd, err := unix.Openat(dir, name, dirFlags, 0)
	if err != nil {
		return fmt.Errorf("open clone %s: %w", e.path, noFollowErr(err))
	}
	defer unix.Close(fd)
	return chownTree(fd, w.own, e.path)
}

// displayURL hides any user info of a URL in messages.
func displayURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if at := strings.IndexByte(u[i+3:], '@'); at >= 0 && !strings.Contains(u[i+3:i+3+at], "/") {
			return u[:i+3] + "…@" + u[i+3+at+1:]
		}
	}
	return u
}

// progressReader counts bytes into the writer's progress.
type progressReader struct {
	r io.Reader
	w *writer
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.w.done += int64(n)
	if p.w.progress != nil && (p.w.done-p.w.lastTick >= 1<<20 || err == io.EOF) {
		p.w.lastTick = p.w.done
		p.w.progress(p.w.done, p.w.total)
	}
	return n, err
}
