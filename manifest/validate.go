package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/fsmode"
	"github.com/agentbox/agentbox/sandbox"
)

// ValidateOptions says where host sources may come from.
type ValidateOptions struct {
	// Base is the trusted base directory: relative sources resolve under
	// it, and sources outside it need a grant. Empty means no host source
	// is allowed at all.
	Base string
	// Trusted is set for manifests written by the operator (a file given
	// on the command line). An untrusted manifest (a server request)
	// cannot carry grants nor reach any host path outside Base.
	Trusted bool
}

// maxTreeProblems caps the problems reported for one source tree, so a
// tree full of sockets does not drown the rest.
const maxTreeProblems = 20

// planned is one validated entry, with its host source resolved.
type planned struct {
	path  string // clean, workspace-relative
	kind  string
	entry Entry
	src   string // real host path of local_file, local_dir, mount, local git
	url   string // what git clones from
	size  int64  // bytes to copy
}

// plan is a validated manifest, ready to materialize.
type plan struct {
	root    string
	entries []planned // sorted by path: parents before children
	total   int64
}

// Validate checks the manifest and reports every problem it finds, each
// with the entry it concerns, as a *ValidationError.
func (m *Manifest) Validate(opts ValidateOptions) error {
	_, err := m.validate(opts)
	return err
}

// EffectiveRoot is Root with its default applied.
func (m *Manifest) EffectiveRoot() string {
	if m.Root == "" {
		return sandbox.DefaultWorkdir
	}
	return m.Root
}

func (m *Manifest) validate(opts ValidateOptions) (*plan, error) {
	var ps problems
	v := &validator{m: m, opts: opts, ps: &ps}
	v.resolveBase()
	p := &plan{root: m.EffectiveRoot()}
	if r := p.root; !path.IsAbs(r) || path.Clean(r) != r || r == "/" {
		ps.add(errInvalid, "root", "%q must be a clean absolute sandbox path other than /", r)
	}
	v.grants()
	flat := v.flatten("", m.Entries)
	slices.SortFunc(flat, func(a, b planned) int { return strings.Compare(a.path, b.path) })
	v.overlaps(flat)
	for i := range flat {
		v.entry(p.root, &flat[i])
		p.total += flat[i].size
	}
	p.entries = flat
	v.env()
	v.users()
	return p, ps.err()
}

// validator carries what the checks share.
type validator struct {
	m        *Manifest
	opts     ValidateOptions
	ps       *problems
	base     string // real path of opts.Base, "" when unusable
	baseErr  string
	grantDir []resolvedGrant
}

type resolvedGrant struct {
	Grant
	real string
}

func (v *validator) resolveBase() {
	if v.opts.Base == "" {
		v.baseErr = "no trusted base directory was given"
		return
	}
	abs, err := filepath.Abs(v.opts.Base)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		v.baseErr = fmt.Sprintf("trusted base %s cannot be resolved: %v", v.opts.Base, err)
		return
	}
	v.base = abs
}

func (v *validator) grants() {
	for i, g := range v.m.Grants {
		where := fmt.Sprintf("grants[%d]", i)
		if !v.opts.Trusted {
			v.ps.add(errInvalid, where, "grant %q refused: a manifest from untrusted input cannot grant itself host access", g.Path)
			continue
		}
		if !filepath.IsAbs(g.Path) || filepath.Clean(g.Path) != g.Path {
			v.ps.add(errInvalid, where, "grant path %q must be a clean absolute host path", g.Path)
			continue
		}
		real, err := filepath.EvalSymlinks(g.Path)
		if err != nil {
			v.ps.add(errNotFound, where, "grant path %q cannot be resolved: %v", g.Path, unwrapPathErr(err))
			continue
		}
		v.grantDir = append(v.grantDir, resolvedGrant{Grant: g, real: real})
	}
}

// flatten lists the entries and their children with joined paths.
func (v *validator) flatten(prefix string, entries map[string]Entry) []planned {
	var out []planned
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e := entries[k]
		full := k
		if prefix != "" {
			full = prefix + "/" + k
		}
		if !v.checkPath(full, k) {
			continue
		}
		out = append(out, planned{path: full, kind: e.kind(), entry: e})
		if e.Dir != nil && len(e.Dir.Children) > 0 {
			out = append(out, v.flatten(full, e.Dir.Children)...)
		}
	}
	return out
}

// checkPath rejects destinations that are absolute, escaping or unclean.
func (v *validator) checkPath(full, key string) bool {
	where := entryWhere(full)
	switch {
	case key == "" || key == ".":
		v.ps.add(errInvalid, where, "empty path: an entry must name a file or directory inside the workspace")
	case strings.IndexByte(key, 0) >= 0:
		v.ps.add(errInvalid, where, "path contains a NUL byte")
	case path.IsAbs(key):
		v.ps.add(errEscape, where, "path is absolute; entries are workspace-relative (write %q)", strings.TrimLeft(key, "/"))
	case slices.Contains(strings.Split(key, "/"), ".."):
		v.ps.add(errEscape, where, "path has a \"..\" component, which could leave the workspace")
	case path.Clean(key) != key:
		v.ps.add(errInvalid, where, "path is not clean (write %q)", path.Clean(key))
	default:
		return true
	}
	return false
}

// overlaps rejects two entries for one path and entries inside anything
// but a dir (a file inside a mount, a copy, a clone or a file).
func (v *validator) overlaps(flat []planned) {
	for i, a := range flat {
		if i > 0 && flat[i-1].path == a.path {
			v.ps.add(errInvalid, entryWhere(a.path), "two entries for one path")
		}
		for _, b := range flat[i+1:] {
			if !strings.HasPrefix(b.path, a.path+"/") {
				if b.path > a.path+"/" {
					break
				}
				continue
			}
			if a.entry.Dir == nil {
				v.ps.add(errInvalid, entryWhere(b.path), "is inside the %s entry %q; only dir entries may contain others", a.kind, a.path)
			}
		}
	}
}

// entry checks one entry by kind and resolves its host source.
func (v *validator) entry(root string, p *planned) {
	where := entryWhere(p.path)
	e := p.entry
	switch p.kind {
	case "":
		v.ps.add(errInvalid, where, "entry has no kind: set one of file, dir, local_file, local_dir, mount, git_repo")
		return
	case "file":
		v.mode(where, "file", e.File.Mode)
		p.size = int64(len(e.File.Content))
	case "dir":
		v.mode(where, "dir", e.Dir.Mode)
	case "local_file":
		v.mode(where, "local_file", e.LocalFile.Mode)
		if real, ok := v.hostSource(where, "local_file src", e.LocalFile.Src, true); ok {
			p.src = real
			p.size = v.sourceFile(where, real)
		}
	case "local_dir":
		if real, ok := v.hostSource(where, "local_dir src", e.LocalDir.Src, true); ok {
			p.src = real
			p.size = v.sourceTree(where, real)
		}
	case "mount":
		if real, ok := v.hostSource(where, "mount src", e.Mount.Src, e.Mount.IsReadOnly()); ok {
			p.src = real
			if fi, err := os.Stat(real); err == nil && !fi.IsDir() {
				v.ps.add(errInvalid, where, "mount src %q is not a directory", e.Mount.Src)
			}
		}
		if err := sandbox.ValidateMountTarget(root, root+"/"+p.path); err != nil {
			v.ps.add(errInvalid, where, "%v", err)
		}
	case "git_repo":
		v.gitRepo(where, p)
	default:
		v.ps.add(errInvalid, where, "entry sets more than one kind (%s); set exactly one", strings.TrimPrefix(p.kind, "multiple: "))
	}
}

// mode rejects permission bits beyond rwx for user, group and other:
// setuid, setgid and sticky bits have no business in a workspace.
func (v *validator) mode(where, kind string, m Mode) {
	if m&^0o777 != 0 {
		v.ps.add(errInvalid, where, "%s mode %s is not allowed: only permission bits (at most 0777), no setuid, setgid or sticky", kind, m)
	}
}

// hostSource resolves a host path (relative to the base) through its
// symlinks and checks it lies under the base or a grant. write says the
// sandbox may write through it (a read-write mount).
func (v *validator) hostSource(where, what, src string, readOnly bool) (string, bool) {
	if src == "" {
		v.ps.add(errInvalid, where, "%s is empty", what)
		return "", false
	}
	if strings.IndexByte(src, 0) >= 0 {
		v.ps.add(errInvalid, where, "%s contains a NUL byte", what)
		return "", false
	}
	abs := src
	if !filepath.IsAbs(src) {
		if v.base == "" {
			v.ps.add(errInvalid, where, "%s %q is relative but %s", what, src, v.baseErr)
			return "", false
		}
		abs = filepath.Join(v.base, src)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		v.ps.add(errNotFound, where, "%s %q: %v", what, src, unwrapPathErr(err))
		return "", false
	}
	via := ""
	if real != filepath.Clean(abs) {
		via = fmt.Sprintf(" (it resolves to %s)", real)
	}
	if v.base != "" && within(v.base, real) {
		return real, true
	}
	if !v.opts.Trusted {
		if v.base == "" {
			v.ps.add(errEscape, where, "%s %q refused: %s, and an untrusted manifest cannot reach host paths", what, src, v.baseErr)
		} else {
			v.ps.add(errEscape, where, "%s %q%s is outside the base %s; an untrusted manifest cannot reach host paths outside it", what, src, via, v.base)
		}
		return "", false
	}
	for _, g := range v.grantDir {
		if !within(g.real, real) {
			continue
		}
		if g.ReadOnly && !readOnly {
			v.ps.add(errInvalid, where, "%s %q is a read-write mount but grant %s is read-only", what, src, g.Path)
			return "", false
		}
		return real, true
	}
	baseDesc := v.base
	if baseDesc == "" {
		baseDesc = "(none: " + v.baseErr + ")"
	}
	v.ps.add(errEscape, where, "%s %q%s is outside the trusted base %s (add a grant)", what, src, via, baseDesc)
	return "", false
}

// sourceFile checks a local_file source is a regular file and sizes it.
func (v *validator) sourceFile(where, real string) int64 {
	fi, err := os.Lstat(real)
	if err != nil {
		v.ps.add(errNotFound, where, "local_file src %s: %v", real, unwrapPathErr(err))
		return 0
	}
	if !fi.Mode().IsRegular() {
		v.ps.add(errInvalid, where, "local_file src %s is a %s, not a regular file", real, fsmode.Describe(fi.Mode()))
		return 0
	}
	return fi.Size()
}

// sourceTree checks a local_dir source: a directory holding only regular
// files, directories and symlinks that stay inside it. It returns the
// bytes to copy.
func (v *validator) sourceTree(where, real string) int64 {
	fi, err := os.Lstat(real)
	if err != nil {
		v.ps.add(errNotFound, where, "local_dir src %s: %v", real, unwrapPathErr(err))
		return 0
	}
	if !fi.IsDir() {
		v.ps.add(errInvalid, where, "local_dir src %s is a %s, not a directory", real, fsmode.Describe(fi.Mode()))
		return 0
	}
	var total int64
	n := 0
	report := func(format string, args ...any) {
		n++
		if n <= maxTreeProblems {
			v.ps.add(errInvalid, where, format, args...)
		}
	}
	_ = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(real, p)
		if err != nil {
			report("local_dir src %s: cannot read %s: %v", real, rel, unwrapPathErr(err))
			return nil
		}
		t := d.Type()
		switch {
		case t.IsDir():
		case t.IsRegular():
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		case t&fs.ModeSymlink != 0:
			if msg := linkEscapes(real, rel); msg != "" {
				v.ps.add(errEscape, where, "local_dir src %s: symlink %s %s", real, rel, msg)
			}
		default:
			report("local_dir src %s: %s is a %s; only regular files, directories and symlinks are copied", real, rel, fsmode.Describe(t))
		}
		return nil
	})
	if n > maxTreeProblems {
		v.ps.add(errInvalid, where, "local_dir src %s: … and %d more special files", real, n-maxTreeProblems)
	}
	return total
}

func (v *validator) env() {
	keys := make([]string, 0, len(v.m.Env))
	for k := range v.m.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		where := fmt.Sprintf("env[%q]", k)
		if k == "" || strings.ContainsAny(k, "=\x00") {
			v.ps.add(errInvalid, where, "bad environment variable name")
		}
		if strings.IndexByte(v.m.Env[k], 0) >= 0 {
			v.ps.add(errInvalid, where, "value contains a NUL byte")
		}
	}
}

func (v *validator) users() {
	seen := map[string]bool{}
	for i, u := range v.m.Users {
		where := fmt.Sprintf("users[%d]", i)
		if u.Name == "" {
			v.ps.add(errInvalid, where, "user has no name")
		} else if seen[u.Name] {
			v.ps.add(errInvalid, where, "user %q is listed twice", u.Name)
		}
		seen[u.Name] = true
		if u.UID < 0 || u.GID < 0 || u.UID > 1<<31-2 || u.GID > 1<<31-2 {
			v.ps.add(errInvalid, where, "user %q: uid %d / gid %d out of range", u.Name, u.UID, u.GID)
		}
	}
	if v.m.RunAs != "" && !seen[v.m.RunAs] {
		v.ps.add(errInvalid, "run_as", "unknown user %q (not in users)", v.m.RunAs)
	}
}

// within reports whether p is dir or below it (both clean, absolute).
func within(dir, p string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// unwrapPathErr drops the *PathError's repetition of the path.
func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
