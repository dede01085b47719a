package manifest

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxLinkHops bounds symlink resolution, like the kernel's ELOOP limit.
const maxLinkHops = 40

// linkEscapes resolves the symlink at rel (relative to root) the way the
// kernel would, following every link it meets inside the tree, and says
// why it leaves the tree ("" when it stays inside). A lexical check is not
// enough: "sub/d/../.." stays inside on paper but leaves the tree when
// sub/d is itself a link to "..".
func linkEscapes(root, rel string) string {
	target, err := os.Readlink(filepath.Join(root, rel))
	if err != nil {
		return fmt.Sprintf("cannot be read: %v", unwrapPathErr(err))
	}
	if path.IsAbs(target) {
		return fmt.Sprintf("has the absolute target %q; only relative links that stay inside the tree are allowed", target)
	}
	var cur []string // resolved components below root, none a symlink
	if d := path.Dir(filepath.ToSlash(rel)); d != "." {
		cur = strings.Split(d, "/")
	}
	todo := strings.Split(target, "/")
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return fmt.Sprintf("points outside the tree (target %q)", target)
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, c)
		p := filepath.Join(append([]string{root}, cur...)...)
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			continue // a missing component resolves lexically; a real one is fine
		}
		hops++
		if hops > maxLinkHops {
			return fmt.Sprintf("is part of a symlink loop (target %q)", target)
		}
		next, err := os.Readlink(p)
		if err != nil {
			return fmt.Sprintf("goes through %s, which cannot be read: %v", strings.Join(cur, "/"), unwrapPathErr(err))
		}
		if path.IsAbs(next) {
			return fmt.Sprintf("goes through %s, which has the absolute target %q", strings.Join(cur, "/"), next)
		}
		cur = cur[:len(cur)-1]
		todo = append(strings.Split(next, "/"), todo...)
	}
	return ""
}
