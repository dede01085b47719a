package manifest

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/bytesize"
	"github.com/agentbox/agentbox/internal/fsmode"
	"github.com/agentbox/agentbox/sandbox"
)

// RenderOptions bound a rendered workspace tree.
type RenderOptions struct {
	// MaxDepth is how many directory levels are listed; default 3.
	MaxDepth int
	// MaxEntries is how many entries are listed in all; default 60. What
	// does not fit is summarized as "… N more".
	MaxEntries int
	// Root is the workspace's sandbox path shown on the first line;
	// default sandbox.DefaultWorkdir.
	Root string
	// Mounts (Materialized.Mounts) are marked as mounts, and their host
	// sources listed in place of the empty mount points.
	Mounts []sandbox.Mount
}

// Render draws a short tree of the workspace at the host directory dir,
// for the model's instructions: directories end in "/", links show their
// target, files their size, mounts are marked "(read-only mount)" or
// "(read-write mount)", and depth and entry count are bounded with
// "… N more" markers. Links are never followed.
func Render(dir string, opts RenderOptions) string {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = 3
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 60
	}
	if opts.Root == "" {
		opts.Root = sandbox.DefaultWorkdir
	}
	r := &renderer{opts: opts, budget: opts.MaxEntries, mounts: map[string]sandbox.Mount{}}
	for _, m := range opts.Mounts {
		if rel, ok := strings.CutPrefix(path.Clean(m.Target), opts.Root+"/"); ok {
			r.mounts[rel] = m
		}
	}
	r.b.WriteString(opts.Root + "/\n")
	r.dir(dir, "", 1, "  ")
	return r.b.String()
}

type renderer struct {
	opts   RenderOptions
	budget int
	mounts map[string]sandbox.Mount
	b      strings.Builder
}

func (r *renderer) line(indent, format string, args ...any) {
	r.b.WriteString(indent)
	fmt.Fprintf(&r.b, format, args...)
	r.b.WriteByte('\n')
}

func (r *renderer) dir(host, rel string, depth int, indent string) {
	entries, err := os.ReadDir(host)
	if err != nil {
		r.line(indent, "(cannot list: %v)", unwrapPathErr(err))
		return
	}
	if depth > r.opts.MaxDepth {
		if len(entries) > 0 {
			r.line(indent, "… %d more", len(entries))
		}
		return
	}
	for i, e := range entries {
		if r.budget <= 0 {
			r.line(indent, "… %d more", len(entries)-i)
			return
		}
		r.budget--
		name := e.Name()
		childRel := path.Join(rel, name)
		childHost := filepath.Join(host, name)
		if m, ok := r.mounts[childRel]; ok {
			access := "read-write"
			if m.ReadOnly {
				access = "read-only"
			}
			r.line(indent, "%s/  (%s mount)", name, access)
			r.dir(m.Source, childRel, depth+1, indent+"  ")
			continue
		}
		switch t := e.Type(); {
		case t.IsDir():
			r.line(indent, "%s/", name)
			r.dir(childHost, childRel, depth+1, indent+"  ")
		case t&fs.ModeSymlink != 0:
			target, _ := os.Readlink(childHost)
			r.line(indent, "%s -> %s", name, target)
		case t.IsRegular():
			size := ""
			if fi, err := e.Info(); err == nil {
				size = "  (" + bytesize.Format(fi.Size()) + ")"
			}
			r.line(indent, "%s%s", name, size)
		default:
			r.line(indent, "%s  (%s)", name, fsmode.Describe(t))
		}
	}
}
