package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/atfile"
	"github.com/agentbox/agentbox/internal/beneath"
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
	// What is in a workspace belongs to the workspace directory's owner
	// (the backends map that owner to the sandbox user): pass OwnerOf's.
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
	// Inputs are the hashes of everything the manifest put before the
	// agent: files written or copied, every file of every mount, the
	// commit of each git checkout; in entry order.
	Inputs []Input
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
	ws, err := os.OpenRoot(real)
	if err != nil {
		return nil, sandbox.Wrap("manifest: materialize into "+dir, sandbox.ErrInvalid, err)
	}
	defer ws.Close()
	top, err := ws.Open(".")
	if err != nil {
		return nil, sandbox.Wrap("manifest: materialize into "+dir, sandbox.ErrInvalid, err)
	}
	defer top.Close()
	w := &writer{ctx: ctx, ws: ws, root: int(top.Fd()), dir: real, own: beneath.Owner{UID: opts.UID, GID: opts.GID}, total: p.total, progress: opts.Progress}
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
			ins, err := mountInputs(ctx, e.src, e.path)
			if err != nil {
				w.cleanup()
				return nil, &sandbox.Error{Op: "manifest: materialize " + entryWhere(e.path), Err: err}
			}
			w.inputs = append(w.inputs, ins...)
		}
	}
	out.Files, out.Bytes, out.Inputs = w.files, w.done, w.inputs
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
	ws       *os.Root // the workspace, for cleanup
	root     int      // its descriptor, where every walk starts
	dir      string
	own      beneath.Owner
	created  []string // workspace-relative, in creation order
	files    int
	done     int64
	total    int64
	progress func(done, total int64)
	lastTick int64
	inputs   []Input
}

// cleanup removes what was created, newest first. It goes through the
// workspace's os.Root: a created directory swapped for a link meanwhile
// cannot take the removal outside the workspace.
func (w *writer) cleanup() {
	for i := len(w.created) - 1; i >= 0; i-- {
		_ = w.ws.RemoveAll(w.created[i])
	}
	w.created = nil
}

// made records p, just created in the workspace, for cleanup.
func (w *writer) made(p string) { w.created = append(w.created, p) }

// entry writes one entry. It is reached from the workspace's descriptor by
// internal/beneath, which refuses a symlink in any component and makes the
// missing parents (0755, owned by w.own); sources are opened the same way
// from "/". So neither side can be redirected by a symlink swapped in
// after validation.
func (w *writer) entry(e planned) error {
	switch {
	case e.entry.File != nil:
		f := e.entry.File
		return w.writeFile(w.root, e.path, orDefault(f.Mode, 0o644), strings.NewReader(f.Content), w.made, &Input{Path: e.path, Kind: "file"})
	case e.entry.Dir != nil, e.entry.Mount != nil:
		mode := fs.FileMode(0o755)
		if e.entry.Dir != nil {
			mode = orDefault(e.entry.Dir.Mode, 0o755)
		}
		// A directory made earlier as a parent, or already in the
		// workspace, is kept as it is; a link or a file is refused.
		fd, err := beneath.Open(w.root, e.path, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir, Make: beneath.MakeMissing, Perm: mode, Owner: &w.own, Made: w.made})
		if err != nil {
			return err
		}
		unix.Close(fd)
		return nil
	case e.entry.LocalFile != nil:
		fd, err := beneath.OpenPath(e.src, beneath.Options{Kind: beneath.Regular})
		if err != nil {
			return err
		}
		src := os.NewFile(uintptr(fd), e.src)
		defer src.Close()
		mode := fs.FileMode(e.entry.LocalFile.Mode)
		if mode == 0 {
			fi, err := src.Stat()
			if err != nil {
				return err
			}
			mode = fi.Mode().Perm()
		}
		return w.writeFile(w.root, e.path, mode, src, w.made, &Input{Path: e.path, Kind: "local_file", Source: e.src})
	case e.entry.LocalDir != nil:
		return w.copyDir(e)
	case e.entry.GitRepo != nil:
		dir, name, err := beneath.OpenParent(w.root, e.path, beneath.Options{Make: beneath.MakeMissing, Owner: &w.own, Made: w.made})
		if err != nil {
			return err
		}
		defer unix.Close(dir)
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

// writeFile creates p beneath dir exclusively, with mode, and copies r
// into it; made is told what was created. in, when set, is recorded as an
// input with the hash of the bytes copied.
func (w *writer) writeFile(dir int, p string, mode fs.FileMode, r io.Reader, made func(string), in *Input) error {
	fd, err := beneath.Open(dir, p, beneath.Options{Flags: unix.O_WRONLY, Kind: beneath.Regular, Make: beneath.MakeNew, Perm: mode, Owner: &w.own, Made: made})
	if err == nil && mode.Perm() == 0 {
		err = unix.Fchmod(fd, 0) // beneath reads Perm 0 as its default
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return err
	}
	dst := os.NewFile(uintptr(fd), p)
	h := newHashingReader(r)
	_, err = io.Copy(dst, &progressReader{r: h, w: w})
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	w.files++
	if in != nil {
		in.SHA256, in.Size = h.sum(), h.size
		w.inputs = append(w.inputs, *in)
	}
	return nil
}

// copyDir copies the tree at e.src to e.path, then checks that every
// symlink copied stays inside the new tree (the copy is ours, so this check
// cannot be raced by the source changing).
func (w *writer) copyDir(e planned) error {
	src, err := beneath.OpenPath(e.src, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir})
	if err != nil {
		return err
	}
	defer unix.Close(src)
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return err
	}
	dst, err := beneath.Open(w.root, e.path, beneath.Options{Kind: beneath.Dir, Make: beneath.MakeNew, Perm: 0o700, Owner: &w.own, Made: w.made})
	if err != nil {
		return err
	}
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
			sub, err := beneath.Open(src, n, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir})
			if err != nil {
				return fmt.Errorf("copy %s: %w", srcShow, err)
			}
			dsub, err := beneath.Open(dst, n, beneath.Options{Kind: beneath.Dir, Make: beneath.MakeNew, Perm: 0o700, Owner: &w.own})
			if err == nil {
				err = w.copyTree(sub, dsub, srcRoot, dstRoot, r, links)
				if err == nil {
					if cerr := unix.Fchmod(dsub, uint32(perm)); cerr != nil {
						err = fmt.Errorf("chmod %s: %w", dstShow, cerr)
					}
				}
				unix.Close(dsub)
			} else {
				err = fmt.Errorf("copy to %s: %w", dstShow, err)
			}
			unix.Close(sub)
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			fd, err := beneath.Open(src, n, beneath.Options{Kind: beneath.Regular})
			if err != nil {
				return fmt.Errorf("copy %s: %w", srcShow, err)
			}
			f := os.NewFile(uintptr(fd), srcShow)
			err = w.writeFile(dst, n, perm, f, nil, &Input{Path: dstShow, Kind: "local_dir", Source: srcShow})
			f.Close()
			if err != nil {
				return fmt.Errorf("copy to %s: %w", dstShow, err)
			}
		case unix.S_IFLNK:
			target, err := atfile.Readlink(src, n)
			if err != nil {
				return fmt.Errorf("readlink %s: %w", srcShow, err)
			}
			if err := unix.Symlinkat(target, dst, n); err != nil {
				return fmt.Errorf("symlink %s: %w", dstShow, err)
			}
			if err := chownLink(dst, n, w.own); err != nil {
				return fmt.Errorf("chown symlink %s: %w", dstShow, err)
			}
			*links = append(*links, r)
			sum := sha256.Sum256([]byte(target))
			w.inputs = append(w.inputs, Input{Path: dstShow, Kind: "local_dir", Source: srcShow, Link: target, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(target))})
		default:
			return fmt.Errorf("%s is a %s now; only regular files, directories and symlinks are copied", srcShow, fsmode.Describe(fsmode.FromStat(st.Mode)))
		}
	}
	return nil
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
	commit, err := headCommit(w.ctx, dest)
	if err != nil {
		return fmt.Errorf("clone %s: %w", displayURL(g.URL), err)
	}
	w.inputs = append(w.inputs, Input{Path: e.path, Kind: "git_repo", Source: displayURL(g.URL), Commit: commit})
	fd, err := beneath.Open(dir, name, beneath.Options{Flags: unix.O_PATH, Kind: beneath.Dir})
	if err != nil {
		return fmt.Errorf("open clone %s: %w", e.path, err)
	}
	defer unix.Close(fd)
	return beneath.ChownTree(fd, w.own, e.path)
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

// OwnerOf is who what is written into the workspace dir must belong to:
// the directory's owner, as root; -1, -1 (the writer itself, who cannot
// give files away) otherwise.
func OwnerOf(dir string) (uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return -1, -1, nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("owner of %s: no stat", dir)
	}
	return int(st.Uid), int(st.Gid), nil
}
