// Package toolcache gives sessions named caches (go, pip, npm) that
// persist between the sessions of one user, so that a second `go test`
// does not rebuild the standard library. Each cache is a host directory
// under the user's data directory, mounted read-write at
// /mnt/cache/<name>, outside the workspace: it is never in a snapshot and
// never promoted. The tool finds it through the environment variables it
// reads (GOCACHE, PIP_CACHE_DIR, ...).
//
// What one session writes to a cache, a later session of the same user
// reads: give caches only to sessions that may influence each other's
// builds.
package toolcache

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/datadir"
	"github.com/agentbox/agentbox/internal/didyoumean"
	"github.com/agentbox/agentbox/sandbox"
)

// Root is the sandbox directory the caches are mounted under.
const Root = "/mnt/cache"

// kinds maps each cache to the variables its tool reads, each to a
// directory relative to the cache's root.
var kinds = map[string]map[string]string{
	"go":  {"GOCACHE": "build", "GOMODCACHE": "mod"},
	"pip": {"PIP_CACHE_DIR": "."},
	"npm": {"npm_config_cache": "."},
}

// Names lists the known caches, sorted.
func Names() []string {
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// FlagUsage is the help of a --cache flag.
func FlagUsage() string {
	return "keep the `NAME[,NAME...]` tool caches (" + strings.Join(Names(), ", ") + ") between your sessions, at " + Root + "/NAME: never in snapshots, never promoted"
}

// Dir is where the caches of the user running agentbox live on the host.
func Dir() string { return filepath.Join(datadir.Dir(), "caches") }

// Apply adds the named caches, kept under the host directory dir (Dir()),
// to spec: a read-write mount of dir/<name> at Root/<name>, made when
// missing, and the variables its tool reads, unless spec already sets
// them. An unknown name is an error that names the known ones.
func Apply(spec *sandbox.Spec, dir string, names []string) error {
	for _, name := range names {
		vars, ok := kinds[name]
		if !ok {
			msg := fmt.Sprintf("unknown cache %q (known: %s)", name, strings.Join(Names(), ", "))
			if near := didyoumean.Nearest(name, Names()); near != "" {
				msg = fmt.Sprintf("unknown cache %q: did you mean %q? (known: %s)", name, near, strings.Join(Names(), ", "))
			}
			return sandbox.Errorf(sandbox.ErrInvalid, "%s", msg)
		}
		target := path.Join(Root, name)
		if slices.ContainsFunc(spec.Mounts, func(m sandbox.Mount) bool { return m.Target == target }) {
			continue // named twice
		}
		host := filepath.Join(dir, name)
		if err := os.MkdirAll(host, 0o755); err != nil {
			return fmt.Errorf("cache %s: %w", name, err)
		}
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: host, Target: target})
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		for k, rel := range vars {
			if _, set := spec.Env[k]; !set {
				spec.Env[k] = path.Join(target, rel)
			}
		}
	}
	return nil
}
