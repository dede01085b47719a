package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/sandbox"
)

// Skills is the capability that offers SKILL.md bundles from a host
// directory: each subdirectory of Dir holding a SKILL.md (with "name" and
// "description" in its front matter) is indexed in the instructions, and
// load_skill copies the bundle into the workspace under .skills/<name>/
// and returns its SKILL.md.
type Skills struct {
	// Dir holds one directory per skill.
	Dir string
	// MaxBundleBytes bounds one bundle's copy (default 8 MiB).
	MaxBundleBytes int64

	once  sync.Once
	index []SkillInfo
	err   error
}

// SkillInfo is one indexed skill.
type SkillInfo struct {
	Name        string
	Description string
	// Dir is the bundle's host directory.
	Dir string
}

// Name implements Capability.
func (s *Skills) Name() string { return "skills" }

// Index reads (once) and returns the skills under Dir, sorted by name. A
// bundle without a name or description in its front matter is an error.
func (s *Skills) Index() ([]SkillInfo, error) {
	s.once.Do(func() { s.index, s.err = indexSkills(s.Dir) })
	return s.index, s.err
}

// Instructions implements Capability: the index of skills, or a note that
// it could not be read.
func (s *Skills) Instructions() string {
	idx, err := s.Index()
	if err != nil {
		return "# Skills\n(the skill index could not be read: " + err.Error() + ")"
	}
	if len(idx) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Skills\nThese skills are available. Call load_skill with a name to copy it into .skills/<name>/ and read its instructions before using it.\n")
	for _, sk := range idx {
		fmt.Fprintf(&b, "- %s: %s\n", sk.Name, sk.Description)
	}
	return strings.TrimRight(b.String(), "\n")
}

var loadSkillSpec = mustSpec("load_skill", "Copy a skill bundle into the workspace under .skills/<name>/ and return its SKILL.md.", `{
  "type": "object",
  "properties": {"name": {"type": "string", "description": "The skill's name, from the index."}},
  "required": ["name"],
  "additionalProperties": false
}`)

// Tools implements Capability.
func (s *Skills) Tools(sess sandbox.Session) []Tool {
	return []Tool{{Spec: loadSkillSpec, Call: func(ctx context.Context, raw json.RawMessage) (string, error) {
		var a struct {
			Name string `json:"name"`
		}
		if err := decodeArgs("load_skill", raw, &a); err != nil {
			return "", err
		}
		return s.load(ctx, sess, a.Name)
	}}}
}

func (s *Skills) load(ctx context.Context, sess sandbox.Session, name string) (string, error) {
	idx, err := s.Index()
	if err != nil {
		return "", fmt.Errorf("load_skill: %w", err)
	}
	var sk *SkillInfo
	var names []string
	for i := range idx {
		names = append(names, idx[i].Name)
		if idx[i].Name == name {
			sk = &idx[i]
		}
	}
	if sk == nil {
		return "", fmt.Errorf("load_skill: no skill %q (available: %s)", name, strings.Join(names, ", "))
	}
	limit := s.MaxBundleBytes
	if limit <= 0 {
		limit = 8 << 20
	}
	var total int64
	var skillMD string
	root := os.DirFS(sk.Dir)
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil // links and devices are not copied
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); total > limit {
			return fmt.Errorf("bundle is over %d bytes", limit)
		}
		data, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		if p == "SKILL.md" {
			skillMD = string(data)
		}
		return sess.WriteFile(ctx, path.Join(".skills", sk.Name, p), data, info.Mode().Perm()|0o600)
	})
	if err != nil {
		return "", fmt.Errorf("load_skill %s: copy %s: %w", name, sk.Dir, err)
	}
	return fmt.Sprintf("Skill %s is in .skills/%s/. Its SKILL.md:\n\n%s", sk.Name, sk.Name, skillMD), nil
}

// indexSkills reads the front matter of dir/*/SKILL.md.
func indexSkills(dir string) ([]SkillInfo, error) {
	if dir == "" {
		return nil, fmt.Errorf("skills: no directory configured")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("skills: read %s: %w", dir, err)
	}
	var out []SkillInfo
	seen := map[string]string{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		bundle := filepath.Join(dir, e.Name())
		f, err := os.Open(filepath.Join(bundle, "SKILL.md"))
		if err != nil {
			continue // not a skill bundle
		}
		meta, err := frontMatter(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("skills: %s/SKILL.md: %w", bundle, err)
		}
		sk := SkillInfo{Name: meta["name"], Description: meta["description"], Dir: bundle}
		if sk.Name == "" || sk.Description == "" {
			return nil, fmt.Errorf("skills: %s/SKILL.md: front matter needs a name and a description", bundle)
		}
		if strings.ContainsAny(sk.Name, "/\\") || sk.Name == "." || sk.Name == ".." {
			return nil, fmt.Errorf("skills: %s/SKILL.md: name %q is not a plain name", bundle, sk.Name)
		}
		if prev, dup := seen[sk.Name]; dup {
			return nil, fmt.Errorf("skills: %q is declared by both %s and %s", sk.Name, prev, bundle)
		}
		seen[sk.Name] = bundle
		out = append(out, sk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// frontMatter reads the "key: value" lines between the leading "---"
// fences of a SKILL.md.
func frontMatter(f *os.File) (map[string]string, error) {
	sc := bufio.NewScanner(f)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "---" {
		return nil, fmt.Errorf("no front matter (the file must start with ---)")
	}
	meta := map[string]string{}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "---" {
			return meta, nil
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		meta[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("front matter is not closed by ---")
}
