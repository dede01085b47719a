package kube

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/agentbox/agentbox/sandbox"
)

// Files move through exec in the Pod, as the session's user, so every path
// is resolved by the Pod's own kernel: a symlink in the workspace cannot
// reach anything the sandbox could not. The scripts exit 3 for a missing
// path and 4 for the wrong kind of file, which become sandbox kinds here.
const (
	readScript  = `[ -e "$1" ] || exit 3; [ -d "$1" ] && exit 4; exec cat -- "$1"`
	writeScript = `d=$(dirname -- "$1"); mkdir -p -- "$d" || exit 1
[ -d "$1" ] && exit 4
t=$(mktemp "$d/.agentbox-write.XXXXXX") || exit 1
cat >"$t" && chmod "$2" "$t" && mv -f -- "$t" "$1" || { rm -f -- "$t"; exit 1; }`
	listScript = `[ -e "$1" ] || exit 3; [ -d "$1" ] || exit 4
exec find "$1" -mindepth 1 -maxdepth 1 -printf '%P\0%s\0%m\0%T@\0%y\0%l\0'`
)

// maxReadFile bounds what ReadFile holds in memory.
const maxReadFile = 256 << 20

// run runs a short script in the Pod and returns its stdout, mapping the
// scripts' exit codes to kinds.
func (s *session) run(ctx context.Context, op, script string, stdin io.Reader, max int64, args ...string) ([]byte, error) {
	if err := s.live(); err != nil {
		return nil, err
	}
	argv := append([]string{"/bin/sh", "-c", script, "agentbox-file"}, args...)
	out := &sandbox.CappedBuffer{Max: max}
	var errb bytes.Buffer
	err := s.stream(ctx, argv, remotecommand.StreamOptions{Stdin: stdin, Stdout: out, Stderr: &errb})
	st, serr := exitStatus(err)
	if serr != nil {
		return nil, sandbox.Wrap(op, nil, serr)
	}
	switch st.ExitCode {
	case 0:
	case 3:
		return nil, sandbox.Errorf(sandbox.ErrNotFound, "%s: no such file or directory", op)
	case 4:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s: wrong kind of file (a directory where a file belongs, or the reverse)", op)
	default:
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s: exit %d: %s", op, st.ExitCode, strings.TrimSpace(errb.String()))
	}
	if out.Truncated() {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s: larger than %d bytes", op, max)
	}
	return out.Bytes(), nil
}

// abs resolves p (absolute under the workdir, or relative to it) to an
// absolute path in the Pod.
func (s *session) abs(p string) (string, error) {
	rel, err := sandbox.ResolveWorkspacePath(s.spec.Workdir, p)
	if err != nil {
		return "", err
	}
	return path.Join(s.spec.Workdir, rel), nil
}

// ReadFile reads a file as the sandbox sees it.
func (s *session) ReadFile(ctx context.Context, p string) ([]byte, error) {
	abs, err := s.abs(p)
	if err != nil {
		return nil, err
	}
	return s.run(ctx, "kube: read "+p, readScript, nil, maxReadFile, abs)
}

// WriteFile writes a file atomically (a temporary file renamed over the
// path) as the session's user.
func (s *session) WriteFile(ctx context.Context, p string, data []byte, mode fs.FileMode) error {
	abs, err := s.abs(p)
	if err != nil {
		return err
	}
	if abs == s.spec.Workdir {
		return sandbox.Errorf(sandbox.ErrInvalid, "kube: write %s: the workspace root is a directory", p)
	}
	_, err = s.run(ctx, "kube: write "+p, writeScript, bytes.NewReader(data), 1<<10, abs, strconv.FormatUint(uint64(mode.Perm()), 8))
	return err
}

// ListDir lists a directory, sorted by name.
func (s *session) ListDir(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	abs, err := s.abs(p)
	if err != nil {
		return nil, err
	}
	op := "kube: list " + p
	out, err := s.run(ctx, op, listScript, nil, maxReadFile, abs)
	if err != nil {
		return nil, err
	}
	return parseList(op, out)
}

// parseList reads listScript's output: six NUL-ended fields per entry.
func parseList(op string, out []byte) ([]sandbox.FileInfo, error) {
	f := strings.Split(string(out), "\x00")
	if len(f) > 0 && f[len(f)-1] == "" {
		f = f[:len(f)-1]
	}
	if len(f)%6 != 0 {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s: malformed listing (%d fields)", op, len(f))
	}
	list := make([]sandbox.FileInfo, 0, len(f)/6)
	for i := 0; i < len(f); i += 6 {
		size, err1 := strconv.ParseInt(f[i+1], 10, 64)
		perm, err2 := strconv.ParseUint(f[i+2], 8, 32)
		secs, err3 := strconv.ParseFloat(f[i+3], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "%s: malformed entry %q", op, f[i])
		}
		mode := fs.FileMode(perm & 0o777)
		if perm&0o4000 != 0 {
			mode |= fs.ModeSetuid
		}
		if perm&0o2000 != 0 {
			mode |= fs.ModeSetgid
		}
		if perm&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		fi := sandbox.FileInfo{Name: f[i], Size: size}
		switch f[i+4] {
		case "d":
			mode |= fs.ModeDir
			fi.IsDir = true
		case "l":
			mode |= fs.ModeSymlink
			fi.Target = f[i+5]
		case "p":
			mode |= fs.ModeNamedPipe
		case "s":
			mode |= fs.ModeSocket
		case "c":
			mode |= fs.ModeDevice | fs.ModeCharDevice
		case "b":
			mode |= fs.ModeDevice
		}
		fi.Mode = mode
		whole, frac := math.Modf(secs)
		fi.ModTime = time.Unix(int64(whole), int64(frac*1e9))
		list = append(list, fi)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list, nil
}
