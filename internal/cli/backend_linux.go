package cli

import (
	"fmt"
	"os"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/linux"
)

// Linux is the native backend. Its sessions' init is agentbox-init beside
// this program, or else this very program re-executed (the backend's init
// package takes such a process over before main runs).
func Linux(opts BackendOptions) (sandbox.Client, error) {
	dir := os.Getenv(stateDirEnv)
	if dir != "" {
		var err error
		if dir, err = checkStateDir(dir); err != nil {
			return nil, err
		}
	}
	return linux.New(linux.Options{Snapshots: opts.Snapshots, Logger: opts.Logger, StateDir: dir})
}

// stateDirEnv names the linux backend's state directory (one directory
// per session: control socket, init log, state, default workspace), for
// hosts whose /run is not a tmpfs; every agentbox command of a user must
// see the same one (resume and delete find sessions there).
const stateDirEnv = "AGENTBOX_STATE_DIR"

// checkStateDir checks a state directory named by the environment (see
// linux.CheckStateDir) and returns it cleaned.
func checkStateDir(dir string) (string, error) {
	dir, err := linux.CheckStateDir(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", stateDirEnv, err)
	}
	return dir, nil
}
