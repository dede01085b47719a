package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"strings"
	"time"
)

// Input is one thing a manifest put before the agent, as it was when the
// session started: a file written or copied into the workspace, a file of
// a mount, or a git checkout. A provenance record lists them so an
// auditor can tell which inputs an output was made from.
type Input struct {
	// Path is where the agent sees it, relative to the workspace.
	Path string `json:"path"`
	// Kind is the manifest entry's kind: file, local_file, local_dir,
	// mount or git_repo.
	Kind string `json:"kind"`
	// Source is the host path it came from (empty for inline content and
	// git, whose URL is in Source without its credentials).
	Source string `json:"source,omitempty"`
	// SHA256 and Size are the file's content; a symbolic link is hashed
	// as its target's text.
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size"`
	// Link is a symbolic link's target.
	Link string `json:"link,omitempty"`
	// Commit is the checked-out commit of a git_repo.
	Commit string `json:"commit,omitempty"`
}

// hashingReader hashes what is read through it.
type hashingReader struct {
	r    io.Reader
	h    hashState
	size int64
}

type hashState interface {
	io.Writer
	Sum([]byte) []byte
}

func newHashingReader(r io.Reader) *hashingReader {
	return &hashingReader{r: r, h: sha256.New()}
}

func (h *hashingReader) Read(b []byte) (int, error) {
	n, err := h.r.Read(b)
	h.h.Write(b[:n])
	h.size += int64(n)
	return n, err
}

func (h *hashingReader) sum() string { return hex.EncodeToString(h.h.Sum(nil)) }

// mountInputs hashes every file of a mount's source tree, which the
// sandbox reads in place. It walks under an os.Root, so a link in the
// tree cannot lead the walk outside it.
func mountInputs(ctx context.Context, src, rel string) ([]Input, error) {
	root, err := os.OpenRoot(src)
	if err != nil {
		return nil, fmt.Errorf("hash mount %s: %w", src, err)
	}
	defer root.Close()
	var out []Input
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		in := Input{Path: path.Join(rel, p), Kind: "mount", Source: path.Join(src, p)}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256([]byte(target))
			in.Link, in.SHA256, in.Size = target, hex.EncodeToString(sum[:]), int64(len(target))
		case d.Type().IsRegular():
			f, err := root.Open(p)
			if err != nil {
				return err
			}
			h := newHashingReader(f)
			_, err = io.Copy(io.Discard, h)
			f.Close()
			if err != nil {
				return err
			}
			in.SHA256, in.Size = h.sum(), h.size
		default:
			return nil // directories and special files hold no content
		}
		out = append(out, in)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hash mount %s: %w", src, err)
	}
	return out, nil
}

// headCommit is the commit checked out in the git repository at dir.
func headCommit(ctx context.Context, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "HEAD")
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse HEAD in %s: %w", dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}
