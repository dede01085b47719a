package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
)

// The native linux backend. Its sessions' init is this very binary,
// re-executed: linux.Main takes the process over when it was started as
// one, before cobra sees the arguments.
func init() {
	reexecHooks = append(reexecHooks, linux.Main)
	backends["linux"] = func(opts backendOptions) (sandbox.Client, error) {
		dir := os.Getenv(stateDirEnv)
		if dir != "" {
			var err error
			if dir, err = checkStateDir(dir); err != nil {
				return nil, err
			}
		}
		return linux.New(linux.Options{Snapshots: opts.Snapshots, Logger: opts.Logger, StateDir: dir})
	}
}

// stateDirEnv names the linux backend's state directory (one directory
// per session: control socket, init log, state, default workspace), for
// hosts whose /run is not a tmpfs; every agentbox command of a user must
// see the same one (resume and delete find sessions there).
const stateDirEnv = "AGENTBOX_STATE_DIR"

// checkStateDir makes sure a state directory named by the environment
// is the caller's alone, and returns it cleaned: absolute, made (mode
// 0700) if missing, owned by the caller and writable by no one else,
// below directories only root or the caller can change (or sticky ones,
// like /tmp). Threat: another user renaming or planting session
// directories, sockets or workspaces, there or on the way there.
func checkStateDir(dir string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%s=%s: must be an absolute path", stateDirEnv, dir)
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("%s: %w", stateDirEnv, err)
	}
	me := os.Geteuid()
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			return "", fmt.Errorf("%s: %w", stateDirEnv, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !fi.IsDir():
			return "", fmt.Errorf("%s=%s: %s is not a directory (a symlink?)", stateDirEnv, dir, d)
		case !ok || (int(st.Uid) != me && st.Uid != 0):
			return "", fmt.Errorf("%s=%s: %s belongs to uid %d, neither you nor root", stateDirEnv, dir, d, st.Uid)
		case d == dir && int(st.Uid) != me:
			return "", fmt.Errorf("%s=%s belongs to uid %d, not to you", stateDirEnv, dir, st.Uid)
		case d == dir && fi.Mode().Perm()&0o022 != 0:
			return "", fmt.Errorf("%s=%s is writable by others (%s)", stateDirEnv, dir, fi.Mode().Perm())
		case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0:
			return "", fmt.Errorf("%s=%s: %s is writable by others (%s) and not sticky", stateDirEnv, dir, d, fi.Mode().Perm())
		}
		if d == "/" {
			return dir, nil
		}
	}
}
