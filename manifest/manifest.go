// Package manifest is agentbox's workspace contract: a declarative list of
// what the sandbox's workspace holds (inline files, empty output dirs,
// copies of host files and trees, read-only or read-write host mounts, git
// clones), its environment and the user commands run as. A Manifest is
// validated against a trusted base directory before anything touches the
// disk, materialized into a host workspace directory with descriptor-based
// copies that a racing symlink swap cannot redirect, and rendered as a
// short tree for the model's instructions.
package manifest

import (
	"fmt"
	"slices"
	"time"
)

// Manifest describes a workspace.
type Manifest struct {
	// Root is the workspace's path inside the sandbox; default
	// sandbox.DefaultWorkdir (/workspace).
	Root string `yaml:"root,omitempty" json:"root,omitempty"`
	// Entries are keyed by workspace-relative path ("data/input.csv").
	Entries map[string]Entry `yaml:"entries,omitempty" json:"entries,omitempty"`
	// Env is added to the environment of every command.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty"`
	// Users are the identities commands may run as, by name.
	Users []User `yaml:"users,omitempty" json:"users,omitempty"`
	// RunAs names one of Users; empty means the backend's default user.
	RunAs string `yaml:"run_as,omitempty" json:"run_as,omitempty"`
	// Grants are host paths outside the trusted base that sources may
	// come from. Only a trusted manifest may carry grants.
	Grants []Grant `yaml:"grants,omitempty" json:"grants,omitempty"`
}

// Entry is one workspace path. Exactly one of its fields is set.
type Entry struct {
	File      *File      `yaml:"file,omitempty" json:"file,omitempty"`
	Dir       *Dir       `yaml:"dir,omitempty" json:"dir,omitempty"`
	LocalFile *LocalFile `yaml:"local_file,omitempty" json:"local_file,omitempty"`
	LocalDir  *LocalDir  `yaml:"local_dir,omitempty" json:"local_dir,omitempty"`
	Mount     *Mount     `yaml:"mount,omitempty" json:"mount,omitempty"`
	GitRepo   *GitRepo   `yaml:"git_repo,omitempty" json:"git_repo,omitempty"`
}

// File is a file with inline content.
type File struct {
	Content string `yaml:"content" json:"content"`
	// Mode defaults to 0644.
	Mode Mode `yaml:"mode,omitempty" json:"mode,omitempty"`
}

// Dir is a directory: a container for Children, or an empty directory
// (typically where the agent writes its outputs).
type Dir struct {
	// Children are keyed by path relative to the directory.
	Children map[string]Entry `yaml:"children,omitempty" json:"children,omitempty"`
	// Mode defaults to 0755.
	Mode Mode `yaml:"mode,omitempty" json:"mode,omitempty"`
}

// LocalFile copies one host file into the workspace.
type LocalFile struct {
	// Src is a host path; relative paths resolve under the trusted base.
	Src string `yaml:"src" json:"src"`
	// Mode defaults to the source's permission bits.
	Mode Mode `yaml:"mode,omitempty" json:"mode,omitempty"`
}

// LocalDir copies a host directory tree into the workspace. Symlinks
// inside it are copied as links and must stay inside the tree.
type LocalDir struct {
	// Src is a host path; relative paths resolve under the trusted base.
	Src string `yaml:"src" json:"src"`
}

// Mount binds a host directory into the sandbox at the entry's path. It is
// not copied, so it is not part of snapshots either.
type Mount struct {
	// Src is a host directory; relative paths resolve under the trusted base.
	Src string `yaml:"src" json:"src"`
	// ReadOnly defaults to true; set it to false for a read-write mount.
	ReadOnly *bool `yaml:"read_only,omitempty" json:"read_only,omitempty"`
}

// IsReadOnly is ReadOnly with its default (true) applied.
func (m *Mount) IsReadOnly() bool { return m.ReadOnly == nil || *m.ReadOnly }

// GitRepo clones a repository with the git binary, at depth 1 where the
// transport allows it, without credential helpers or prompts.
type GitRepo struct {
	// URL is a local path (resolved like Src) or an http(s)/ssh/git URL.
	URL string `yaml:"url" json:"url"`
	// Ref is a branch, tag or commit id; empty means the default branch.
	Ref string `yaml:"ref,omitempty" json:"ref,omitempty"`
	// Timeout bounds the clone; default DefaultGitTimeout.
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// DefaultGitTimeout bounds a clone whose entry sets no timeout.
const DefaultGitTimeout = 2 * time.Minute

// User is an identity commands may run as.
type User struct {
	Name string `yaml:"name" json:"name"`
	UID  int    `yaml:"uid" json:"uid"`
	GID  int    `yaml:"gid" json:"gid"`
}

// Grant lets sources come from a host path outside the trusted base.
type Grant struct {
	// Path is an absolute host path (a file or a directory tree).
	Path string `yaml:"path" json:"path"`
	// ReadOnly grants may be copied from or mounted read-only, never
	// mounted read-write.
	ReadOnly bool `yaml:"read_only" json:"read_only"`
}

// kind names the entry's single set field, "" when none is and
// "multiple" when more than one is.
func (e Entry) kind() string {
	var kinds []string
	if e.File != nil {
		kinds = append(kinds, "file")
	}
	if e.Dir != nil {
		kinds = append(kinds, "dir")
	}
	if e.LocalFile != nil {
		kinds = append(kinds, "local_file")
	}
	if e.LocalDir != nil {
		kinds = append(kinds, "local_dir")
	}
	if e.Mount != nil {
		kinds = append(kinds, "mount")
	}
	if e.GitRepo != nil {
		kinds = append(kinds, "git_repo")
	}
	switch len(kinds) {
	case 0:
		return ""
	case 1:
		return kinds[0]
	}
	return "multiple: " + fmt.Sprint(kinds)
}

// user finds a user by name.
func (m *Manifest) user(name string) (User, bool) {
	i := slices.IndexFunc(m.Users, func(u User) bool { return u.Name == name })
	if i < 0 {
		return User{}, false
	}
	return m.Users[i], true
}
