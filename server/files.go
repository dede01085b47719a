package server

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/server/api"
	"github.com/agentbox/agentbox/trace"
)

// Files beyond read, write and list go through the Session contract too,
// so they mean the same on every backend and see the workspace as the
// sandbox does: stat is a listing of the parent, remove runs rm in the
// sandbox (as the session's user, under its mounts' read-only rule), a
// directory leaves as a tar built from listings and reads, and a tar
// arrives through the snapshot store's importer (the one reader of
// untrusted archives) before its files are written one by one.

// workspacePath resolves a sandbox path of sess to a clean
// workspace-relative one ("." for the workdir).
func workspacePath(sess sandbox.Session, p string) (string, error) {
	if p == "" {
		return "", sandbox.Errorf(sandbox.ErrInvalid, "no path: give ?path= (relative to the workdir, or absolute under it)")
	}
	return sandbox.ResolveWorkspacePath(workdir(sess), p)
}

func workdir(sess sandbox.Session) string {
	if wd := sess.State().Spec.Workdir; wd != "" {
		return wd
	}
	return sandbox.DefaultWorkdir
}

// stat describes the workspace path rel of sess, found in its parent's
// listing; the workdir itself is a directory named ".".
func stat(ctx context.Context, sess sandbox.Session, rel string) (sandbox.FileInfo, error) {
	if rel == "." {
		if _, err := sess.ListDir(ctx, "."); err != nil {
			return sandbox.FileInfo{}, err
		}
		return sandbox.FileInfo{Name: ".", Mode: fs.ModeDir | 0o755, IsDir: true}, nil
	}
	infos, err := sess.ListDir(ctx, path.Dir(rel))
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	for _, fi := range infos {
		if fi.Name == path.Base(rel) {
			return fi, nil
		}
	}
	return sandbox.FileInfo{}, sandbox.Errorf(sandbox.ErrNotFound, "%s: no such file or directory", rel)
}

func (s *Server) handleStat(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	rel, err := workspacePath(sess, r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	fi, err := stat(r.Context(), sess, rel)
	if err != nil {
		return s.checked(l, err)
	}
	writeJSON(w, http.StatusOK, fi)
	return nil
}

// handleRemove removes a file, a symbolic link or an empty directory;
// ?recursive=1 removes a directory with everything in it. The workdir
// itself is never removed.
func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	rel, err := workspacePath(sess, q.Get("path"))
	if err != nil {
		return err
	}
	if rel == "." {
		return sandbox.Errorf(sandbox.ErrInvalid, "path %q is the workdir itself; remove what is in it, or delete the session", q.Get("path"))
	}
	recursive, err := flag(q.Get("recursive"), "recursive")
	if err != nil {
		return err
	}
	if _, err := stat(r.Context(), sess, rel); err != nil {
		return s.checked(l, err)
	}
	cmd := []string{"rm", "-d", "--", rel}
	if recursive {
		cmd = []string{"rm", "-rf", "--", rel}
	}
	res, err := sandbox.Exec(r.Context(), sess, sandbox.ExecRequest{Cmd: cmd, Workdir: workdir(sess)})
	if err != nil {
		return s.checked(l, err)
	}
	l.emit(trace.Event{Type: trace.ToolCall, Tool: "remove", Arguments: rel, Err: strings.TrimSpace(string(res.Stderr))})
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if strings.Contains(msg, "not empty") {
			return sandbox.Errorf(sandbox.ErrInvalid, "remove %s: the directory is not empty; add recursive=1 to remove it with its contents", rel)
		}
		return sandbox.Errorf(sandbox.ErrInvalid, "remove %s: %s", rel, msg)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// flag reads a boolean query parameter: "", 0, false or 1, true.
func flag(v, name string) (bool, error) {
	switch strings.ToLower(v) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, sandbox.Errorf(sandbox.ErrInvalid, "%s=%q: want 1 or 0", name, v)
}

// dirPath is the directory ?path= names, in the workspace; the workdir
// when it names none.
func dirPath(sess sandbox.Session, r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		p = "."
	}
	return workspacePath(sess, p)
}

// handleGetArchive streams the directory ?path= (default the workdir) as
// a tar archive of its files, directories and symbolic links. An error
// once the archive has begun aborts the connection, so that a client never
// takes a cut archive for a whole one.
func (s *Server) handleGetArchive(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	rel, err := dirPath(sess, r)
	if err != nil {
		return err
	}
	fi, err := stat(r.Context(), sess, rel)
	if err != nil {
		return s.checked(l, err)
	}
	if !fi.IsDir {
		return sandbox.Errorf(sandbox.ErrInvalid, "%s is not a directory; read a file with GET .../files", rel)
	}
	w.Header().Set("Content-Type", "application/x-tar")
	tw := tar.NewWriter(w)
	if err := archiveDir(r.Context(), sess, tw, rel, ""); err != nil {
		s.log.Warn("archive aborted", "tenant", t.name, "session", sess.ID(), "path", rel, "err", err)
		panic(http.ErrAbortHandler)
	}
	if err := tw.Close(); err != nil {
		panic(http.ErrAbortHandler)
	}
	return nil
}

// archiveDir writes the directory dir (workspace-relative) of sess into
// tw under the name prefix.
func archiveDir(ctx context.Context, sess sandbox.Session, tw *tar.Writer, dir, prefix string) error {
	infos, err := sess.ListDir(ctx, dir)
	if err != nil {
		return err
	}
	for _, fi := range infos {
		name := path.Join(prefix, fi.Name)
		src := path.Join(dir, fi.Name)
		h := &tar.Header{Name: name, Mode: int64(fi.Mode.Perm()), ModTime: fi.ModTime, Format: tar.FormatPAX}
		switch {
		case fi.IsDir:
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if err := archiveDir(ctx, sess, tw, src, name); err != nil {
				return err
			}
		case fi.Mode&fs.ModeSymlink != 0:
			h.Typeflag, h.Linkname = tar.TypeSymlink, fi.Target
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		case fi.Mode.IsRegular():
			data, err := sess.ReadFile(ctx, src)
			if err != nil {
				return err
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		default:
			// Sockets, fifos, devices: not content; left out.
		}
	}
	return nil
}

// handlePutArchive writes the files of a tar archive (plain, gzip or zstd)
// under the directory ?path= (default the workdir), making it and the
// archive's directories. The archive is untrusted and is read by the
// snapshot store's importer, under the same limits as a snapshot import
// and the tenant's body limit: absolute names, "..", devices, fifos and
// hard links to anything but an earlier file of the archive are refused
// (400) before anything is written. Symbolic links are refused too: the
// API writes files, not links. Files already there are replaced.
func (s *Server) handlePutArchive(w http.ResponseWriter, r *http.Request, t *tenant) error {
	l, sess, err := s.use(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	dest, err := dirPath(sess, r)
	if err != nil {
		return err
	}
	tmp, cleanup, err := s.unpack(r, t, sess.State().Spec.Policy.Resources.DiskBytes)
	if err != nil {
		return err
	}
	defer cleanup()
	var files, dirs []string
	err = filepath.WalkDir(tmp, func(hp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tmp, hp)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return sandbox.Errorf(sandbox.ErrInvalid, "archive entry %q is a symbolic link: the API writes files and directories only", rel)
		case d.IsDir():
			dirs = append(dirs, path.Join(dest, rel))
		case d.Type().IsRegular():
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Directories first (an empty one has no file to make it), in one
	// command run as the session's user.
	mk := append([]string{"mkdir", "-p", "--"}, dirs...)
	res, err := sandbox.Exec(r.Context(), sess, sandbox.ExecRequest{Cmd: mk, Workdir: workdir(sess)})
	if err != nil {
		return s.checked(l, err)
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.ErrInvalid, "make the archive's directories under %s: %s", dest, strings.TrimSpace(string(res.Stderr)))
	}
	for _, rel := range files {
		hp := filepath.Join(tmp, filepath.FromSlash(rel))
		data, err := os.ReadFile(hp)
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		fi, err := os.Lstat(hp)
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		if err := sess.WriteFile(r.Context(), path.Join(dest, rel), data, fi.Mode().Perm()); err != nil {
			return s.checked(l, err)
		}
	}
	l.emit(trace.Event{Type: trace.ToolCall, Tool: "write_archive", Arguments: dest, Output: fmt.Sprintf("%d files, %d directories", len(files), len(dirs))})
	writeJSON(w, http.StatusOK, api.ArchiveResult{Files: len(files), Dirs: len(dirs)})
	return nil
}

// unpack imports the request's archive into the tenant's snapshot store
// and restores it into a private directory, which cleanup removes.
// maxBytes, when positive, bounds what the files total (the session's
// disk limit). The snapshot is deleted unless the tenant already had it.
func (s *Server) unpack(r *http.Request, t *tenant, maxBytes int64) (dir string, cleanup func(), err error) {
	info, err := t.store.Import(r.Context(), r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", nil, mbe
		}
		return "", nil, fmt.Errorf("archive: the body is a tar archive (plain, gzip or zstd) of files and directories: %w", err)
	}
	if !s.reg.HasSnapshot(t.name, info.ID) {
		defer func() { _ = t.store.Delete(context.WithoutCancel(r.Context()), info.ID) }()
	}
	base := filepath.Join(s.opts.Data, "tenants", t.name, "tmp")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", nil, fmt.Errorf("archive: %w", err)
	}
	tmp, err := os.MkdirTemp(base, "archive-")
	if err != nil {
		return "", nil, fmt.Errorf("archive: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(tmp) }
	dir = filepath.Join(tmp, "tree")
	if err := t.store.Restore(r.Context(), info.ID, dir, maxBytes); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("archive: %w", err)
	}
	return dir, cleanup, nil
}
