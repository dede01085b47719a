package docker

import (
	"archive/tar"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// rootfsVersion changes whenever the layout below changes, so that a cached
// image built by an older agentbox is rebuilt.
const rootfsVersion = "agentbox-rootfs-4"

// baseTools are the host programs copied into the base image, with the
// shared libraries they load. Missing optional ones are skipped; the
// required ones (requiredTools) fail the build.
var baseTools = []string{
	"sh", "dash", "bash", "env", "true", "false", "echo", "printf", "test", "[",
	"cat", "ls", "cp", "mv", "rm", "ln", "mkdir", "rmdir", "touch", "chmod", "chown",
	"chgrp", "stat", "readlink", "realpath", "basename", "dirname", "pwd", "id",
	"whoami", "uname", "date", "sleep", "head", "tail", "wc", "sort", "uniq", "cut",
	"tr", "tee", "seq", "yes", "nproc", "mktemp", "du", "df", "sha256sum", "md5sum",
	"base64", "od", "dd", "truncate", "comm", "join", "paste", "fold", "expr", "timeout", "nice",
	"grep", "egrep", "fgrep", "sed", "awk", "mawk", "gawk", "find", "xargs", "diff",
	"cmp", "stty", "tty", "tar", "gzip", "gunzip", "zcat", "which", "kill", "ps", "setsid",
	"python3", "git", "less", "file", "patch",
}

var requiredTools = []string{"sh", "python3", "git"}

// binDirs are searched for baseTools, in order.
var binDirs = []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"}

// rootfsEntry is one file of the image: a host file copied, or synthetic
// content generated here.
type rootfsEntry struct {
	name     string // path in the image, relative, slash-separated
	host     string // host path to copy from; empty for synthetic entries
	typ      byte   // tar.TypeReg, TypeDir or TypeSymlink
	mode     int64
	size     int64
	mtime    time.Time
	linkname string
	uid, gid int
	data     []byte // synthetic regular file content
	dev, ino uint64 // for hard link detection
}

// rootfsPlan is the list of entries of the base image and their hash.
type rootfsPlan struct {
	entries map[string]*rootfsEntry
	elves   []string // host ELF files whose libraries must be copied
	seen    map[string]bool
}

func newRootfsPlan() *rootfsPlan {
	return &rootfsPlan{entries: map[string]*rootfsEntry{}, seen: map[string]bool{}}
}

// planBaseRootfs gathers the host files that make up the base image: a
// shell, coreutils, python3 with its standard library, git, and the shared
// libraries they need (found with ldd), plus a minimal /etc.
func planBaseRootfs() (*rootfsPlan, error) {
	p := newRootfsPlan()
	for _, l := range []string{"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"} {
		if fi, err := os.Lstat(l); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if err := p.addPath(l); err != nil {
				return nil, err
			}
		}
	}
	for _, tool := range baseTools {
		host := findTool(tool)
		if host == "" {
			if slices.Contains(requiredTools, tool) {
				return nil, fmt.Errorf("build base image: required host program %q not found in %s", tool, strings.Join(binDirs, ":"))
			}
			continue
		}
		if err := p.addPath(host); err != nil {
			return nil, err
		}
	}
	if err := p.addPython(); err != nil {
		return nil, err
	}
	for _, dir := range []string{"/usr/lib/git-core", "/usr/share/git-core"} {
		if err := p.addTree(dir, nil); err != nil {
			return nil, err
		}
	}
	if err := p.addLibraries(); err != nil {
		return nil, err
	}
	p.addSynthetic()
	return p, nil
}

func findTool(name string) string {
	for _, d := range binDirs {
		h := filepath.Join(d, name)
		if fi, err := os.Stat(h); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return h
		}
	}
	return ""
}

// addPython adds the system python3's standard library (not a pyenv or
// venv shim: the interpreter resolved from /usr/bin/python3).
func (p *rootfsPlan) addPython() error {
	py := findTool("python3")
	real, err := filepath.EvalSymlinks(py)
	if err != nil {
		return fmt.Errorf("build base image: resolve %s: %w", py, err)
	}
	ver := filepath.Base(real) // python3.11
	if !strings.HasPrefix(ver, "python3.") {
		return fmt.Errorf("build base image: %s resolves to %s, not a python3.X interpreter", py, real)
	}
	skip := func(rel string) bool {
		top, _, _ := strings.Cut(rel, "/")
		return top == "test" || top == "idlelib" || top == "tkinter" || top == "turtledemo" ||
			strings.HasPrefix(top, "config-") || top == "ensurepip"
	}
	return p.addTree(filepath.Join("/usr/lib", ver), skip)
}

// addTree adds every file under dir; skip filters relative paths.
func (p *rootfsPlan) addTree(dir string, skip func(rel string) bool) error {
	if _, err := os.Stat(dir); err != nil {
		return nil // optional tree (git-core of an absent git, etc.)
	}
	return filepath.WalkDir(dir, func(h string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("build base image: walk %s: %w", h, err)
		}
		rel, _ := filepath.Rel(dir, h)
		if rel != "." && skip != nil && skip(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return p.addDir(h)
		}
		return p.addPath(h)
	})
}

func (p *rootfsPlan) addDir(h string) error {
	name := strings.TrimPrefix(path.Clean(filepath.ToSlash(h)), "/")
	if name == "" || p.entries[name] != nil {
		return nil
	}
	fi, err := os.Stat(h)
	if err != nil {
		return fmt.Errorf("build base image: stat %s: %w", h, err)
	}
	p.entries[name] = &rootfsEntry{name: name, typ: tar.TypeDir, mode: int64(fi.Mode().Perm()), mtime: fi.ModTime()}
	return p.addDir(filepath.Dir(h))
}

// addPath adds a host file, its parent directories, and, for a symlink,
// what it points to. Directory components that are symlinks (merged /usr)
// are resolved so each file appears once under its real path.
func (p *rootfsPlan) addPath(h string) error {
	h = filepath.Clean(h)
	if p.seen[h] {
		return nil
	}
	p.seen[h] = true
	dir, err := filepath.EvalSymlinks(filepath.Dir(h))
	if err != nil {
		return fmt.Errorf("build base image: resolve %s: %w", filepath.Dir(h), err)
	}
	real := filepath.Join(dir, filepath.Base(h))
	if err := p.addDir(dir); err != nil {
		return err
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return fmt.Errorf("build base image: stat %s: %w", real, err)
	}
	name := strings.TrimPrefix(filepath.ToSlash(real), "/")
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(real)
		if err != nil {
			return fmt.Errorf("build base image: read link %s: %w", real, err)
		}
		p.entries[name] = &rootfsEntry{name: name, typ: tar.TypeSymlink, mode: 0o777, linkname: target, mtime: fi.ModTime()}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		if _, err := os.Stat(target); err != nil {
			return nil // dangling on the host too
		}
		if st, err := os.Stat(target); err == nil && st.IsDir() {
			return p.addDir(target)
		}
		return p.addPath(target)
	case fi.Mode().IsRegular():
		e := &rootfsEntry{name: name, host: real, typ: tar.TypeReg, mode: int64(fi.Mode().Perm()), size: fi.Size(), mtime: fi.ModTime()}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			e.dev, e.ino = uint64(st.Dev), st.Ino
		}
		p.entries[name] = e
		if fi.Mode()&0o111 != 0 || strings.Contains(filepath.Base(real), ".so") {
			p.elves = append(p.elves, real)
		}
	case fi.IsDir():
		return p.addDir(real)
	}
	return nil
}

// addLibraries reads the dynamic section of every executable and shared
// object collected (PT_INTERP, DT_NEEDED, DT_RUNPATH/RPATH) and adds the
// libraries named, the way the dynamic loader finds them, until nothing new
// appears. Parsing ELF is far faster than running ldd on each file.
func (p *rootfsPlan) addLibraries() error {
	dirs := librarySearchPath()
	done := map[string]bool{}
	for len(p.elves) > 0 {
		f := p.elves[len(p.elves)-1]
		p.elves = p.elves[:len(p.elves)-1]
		if done[f] {
			continue
		}
		done[f] = true
		interp, needed, runpath, ok := elfDeps(f)
		if !ok {
			continue
		}
		if interp != "" {
			if err := p.addPath(interp); err != nil {
				return err
			}
		}
		for _, lib := range needed {
			found := ""
			for _, d := range append(expandOrigin(runpath, filepath.Dir(f)), dirs...) {
				if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
					found = filepath.Join(d, lib)
					break
				}
			}
			if found == "" {
				continue // the loader would fail too; the tool is just unusable
			}
			if err := p.addPath(found); err != nil {
				return err
			}
		}
	}
	return nil
}

// elfDeps reads an ELF file's interpreter, needed libraries and run path.
func elfDeps(f string) (interp string, needed, runpath []string, ok bool) {
	ef, err := elf.Open(f)
	if err != nil {
		return "", nil, nil, false
	}
	defer ef.Close()
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err == nil {
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	needed, _ = ef.DynString(elf.DT_NEEDED)
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		if rp, err := ef.DynString(tag); err == nil {
			for _, r := range rp {
				runpath = append(runpath, strings.Split(r, ":")...)
			}
		}
	}
	return interp, needed, runpath, true
}

func expandOrigin(paths []string, origin string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "${ORIGIN}", origin), "$ORIGIN", origin)
		if filepath.IsAbs(p) {
			out = append(out, p)
		}
	}
	return out
}

// librarySearchPath is the loader's default path: the directories of
// /etc/ld.so.conf.d and the standard ones.
func librarySearchPath() []string {
	var dirs []string
	confs, _ := filepath.Glob("/etc/ld.so.conf.d/*.conf")
	for _, conf := range confs {
		data, err := os.ReadFile(conf)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "/") {
				dirs = append(dirs, line)
			}
		}
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// addSynthetic adds the directories and /etc files the image needs that do
// not come from the host: the unprivileged user 1000, writable /tmp, and
// mount points.
func (p *rootfsPlan) addSynthetic() {
	now := time.Unix(0, 0)
	dir := func(name string, mode int64, uid, gid int) {
		p.entries[name] = &rootfsEntry{name: name, typ: tar.TypeDir, mode: mode, uid: uid, gid: gid, mtime: now}
	}
	file := func(name, content string) {
		p.entries[name] = &rootfsEntry{name: name, typ: tar.TypeReg, mode: 0o644, data: []byte(content), size: int64(len(content)), mtime: now}
	}
	for _, d := range []string{"etc", "dev", "proc", "sys", "run", "var", "usr/local/bin", "mnt", "opt", "data", "home"} {
		dir(d, 0o755, 0, 0)
	}
	dir("usr/local", 0o755, 0, 0)
	dir("tmp", 0o1777, 0, 0)
	dir("var/tmp", 0o1777, 0, 0)
	dir("root", 0o700, 0, 0)
	dir("workspace", 0o755, 1000, 1000)
	dir("home/agent", 0o755, 1000, 1000)
	file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agentbox:/home/agent:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	file("etc/group", "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n")
	file("etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n")
	file("etc/os-release", "NAME=agentbox-base\nID=agentbox\nPRETTY_NAME=\"agentbox base image (host binaries)\"\n")
	file("etc/gitconfig", "[safe]\n\tdirectory = *\n[init]\n\tdefaultBranch = main\n")
}

// sorted returns the entries in tar order: parents before children.
func (p *rootfsPlan) sorted() []*rootfsEntry {
	names := make([]string, 0, len(p.entries))
	for n := range p.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*rootfsEntry, len(names))
	for i, n := range names {
		out[i] = p.entries[n]
	}
	return out
}

// hash identifies the plan's content from metadata (names, sizes, modes,
// modification times, link targets) and synthetic content: it changes
// when the host's packages are upgraded, without reading every byte.
func (p *rootfsPlan) hash() string {
	h := sha256.New()
	fmt.Fprintln(h, rootfsVersion)
	for _, e := range p.sorted() {
		fmt.Fprintf(h, "%s\x00%c\x00%o\x00%d\x00%d\x00%s\x00%d:%d\x00", e.name, e.typ, e.mode, e.size, e.mtime.UnixNano(), e.linkname, e.uid, e.gid)
		h.Write(e.data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// totalBytes is the sum of regular file sizes, for progress reports.
func (p *rootfsPlan) totalBytes() int64 {
	var n int64
	for _, e := range p.entries {
		if e.typ == tar.TypeReg {
			n += e.size
		}
	}
	return n
}

// writeTar streams the root filesystem as a tar archive. Host hard links
// become tar hard links. progress, when set, is called with bytes written.
func (p *rootfsPlan) writeTar(w io.Writer, progress func(n int64)) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{}
	for _, e := range p.sorted() {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, ModTime: e.mtime, Uid: e.uid, Gid: e.gid, Typeflag: e.typ, Linkname: e.linkname, Format: tar.FormatPAX}
		if e.typ == tar.TypeDir {
			hdr.Name += "/"
		}
		if e.typ == tar.TypeReg {
			if e.host != "" && e.ino != 0 {
				key := [2]uint64{e.dev, e.ino}
				if first, ok := links[key]; ok {
					hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
					if err := tw.WriteHeader(hdr); err != nil {
						return fmt.Errorf("write tar header %s: %w", e.name, err)
					}
					continue
				}
				links[key] = e.name
			}
			hdr.Size = e.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write tar header %s: %w", e.name, err)
		}
		if e.typ != tar.TypeReg {
			continue
		}
		if e.host == "" {
			if _, err := tw.Write(e.data); err != nil {
				return fmt.Errorf("write %s: %w", e.name, err)
			}
			continue
		}
		if err := copyFile(tw, e); err != nil {
			return err
		}
		if progress != nil {
			progress(e.size)
		}
	}
	return tw.Close()
}

func copyFile(tw *tar.Writer, e *rootfsEntry) error {
	f, err := os.Open(e.host)
	if err != nil {
		return fmt.Errorf("build base image: open %s: %w", e.host, err)
	}
	defer f.Close()
	n, err := io.Copy(tw, io.LimitReader(f, e.size))
	if err != nil {
		return fmt.Errorf("build base image: copy %s: %w", e.host, err)
	}
	if n != e.size {
		return fmt.Errorf("build base image: %s changed size while building (%d of %d bytes)", e.host, n, e.size)
	}
	return nil
}
