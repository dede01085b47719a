package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/fsmode"
	"github.com/agentbox/agentbox/sandbox"
)

// PromoteOptions are the context of one promotion.
type PromoteOptions struct {
	// RunID and TraceID are copied into the record.
	RunID, TraceID string
	// Run, when set, is copied into the record: what made the files.
	Run *RunRecord
	// NewSession starts the session in which the rules' validate commands
	// run: a fresh one, that nothing else runs in (FreshSessionLike makes
	// one like the agent's). Promote writes the staged copy of every file
	// into its workspace, runs the commands there on those copies, and
	// closes it. Not the agent's own session: there, a process the agent
	// left running could swap a file for a passing version while the
	// command reads it and swap it back before any re-hash, and the bytes
	// promoted would not be the bytes judged. Without NewSession, a rule
	// with a validate command fails (it is never skipped as passing).
	NewSession func(ctx context.Context) (sandbox.Session, error)
	// Now is the record's clock; default time.Now.
	Now func() time.Time
	// ValidateTimeout bounds each validate command; default 1 minute.
	ValidateTimeout time.Duration
}

// DefaultValidateTimeout bounds a validate command when none is set.
const DefaultValidateTimeout = time.Minute

// candidate is a workspace file that some outputs match.
type candidate struct {
	entry  Entry
	rules  []*Output
	staged string
	sum    string
	size   int64
	det    detection
	checks []Check
	failed bool
	// acceptedAs is the type a rule accepted the content as (text is
	// valid Markdown), recorded in place of the detected one.
	acceptedAs string
}

// Promote checks every file of src that the rules' globs match and, only
// if every rule passes for every file, copies them into the directory dest
// with a provenance record (RecordName). Files are read once, hashed while
// copied into a staging directory beside dest, and re-hashed there; the
// staged tree is then renamed into place (dest is created by a single
// rename when it does not exist; otherwise each file is renamed in and
// the record comes last). A refused promotion returns a *RejectedError
// listing every file and the rule it broke, and leaves dest untouched.
func Promote(ctx context.Context, src Source, rules *Rules, dest string, opts PromoteOptions) (*Record, error) {
	if rules == nil {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "artifact: promote: no rules")
	}
	if err := rules.Compile(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ValidateTimeout <= 0 {
		opts.ValidateTimeout = DefaultValidateTimeout
	}
	destAbs, err := filepath.Abs(dest)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(destAbs); err == nil && !fi.IsDir() {
		return nil, sandbox.Errorf(sandbox.ErrInvalid, "artifact: promote: destination %s exists and is not a directory", dest)
	}
	if err := checkDestOutsideSource(src, destAbs); err != nil {
		return nil, err
	}
	entries, err := src.List(ctx, rules.mayContain)
	if err != nil {
		return nil, err
	}
	p := &promotion{ctx: ctx, src: src, rules: rules, opts: opts}
	p.match(entries)
	for _, c := range p.cands {
		p.static(c)
	}
	// Stage on the destination's file system so the final renames cannot
	// cross devices: inside dest when it exists (a mount point, say),
	// beside it otherwise.
	stageIn := destAbs
	if _, err := os.Lstat(destAbs); err != nil {
		stageIn = filepath.Dir(destAbs)
		if err := os.MkdirAll(stageIn, 0o755); err != nil {
			return nil, fmt.Errorf("artifact: create %s: %w", stageIn, err)
		}
	}
	staging, err := os.MkdirTemp(stageIn, ".agentbox-promote-*")
	if err != nil {
		return nil, fmt.Errorf("artifact: create staging dir beside %s: %w", dest, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = os.RemoveAll(staging)
		}
	}()
	for _, c := range p.cands {
		if c.failed {
			continue
		}
		if err := p.stage(c, staging); err != nil {
			return nil, err
		}
		if !c.failed {
			p.content(c)
		}
	}
	p.validate()
	if len(p.violations) > 0 {
		return nil, &RejectedError{Violations: p.violations}
	}
	rec := &Record{
		Version: RecordVersion, RunID: opts.RunID, TraceID: opts.TraceID,
		Time: opts.Now().UTC(), AgentboxVersion: Version, Source: src.Describe(),
		Files: []FileRecord{}, Run: opts.Run,
	}
	for _, c := range p.cands {
		typ := c.det.Type
		if c.acceptedAs != "" {
			typ = c.acceptedAs
		}
		rec.Files = append(rec.Files, FileRecord{
			Path: c.entry.Path, SHA256: c.sum, Size: c.size, Type: typ,
			SourcePath: src.Where(c.entry.Path), Checks: c.checks,
		})
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeSynced(filepath.Join(staging, RecordName), append(data, '\n')); err != nil {
		return nil, fmt.Errorf("artifact: write record: %w", err)
	}
	if err := commit(staging, destAbs, p.cands); err != nil {
		return nil, err
	}
	committed = true
	return rec, nil
}

// promotion is the state of one Promote call.
type promotion struct {
	ctx        context.Context
	src        Source
	rules      *Rules
	opts       PromoteOptions
	cands      []*candidate
	violations []Violation
}

func (p *promotion) fail(c *candidate, o *Output, check, format string, args ...any) {
	path := ""
	if c != nil {
		path = c.entry.Path
		c.failed = true
	}
	p.violations = append(p.violations, Violation{Path: path, Rule: o.Glob, Check: check, Msg: fmt.Sprintf(format, args...)})
}

func (p *promotion) pass(c *candidate, o *Output, check, format string, args ...any) {
	c.checks = append(c.checks, Check{Rule: o.Glob, Name: check, OK: true, Detail: fmt.Sprintf(format, args...)})
}

// match pairs entries with the outputs whose globs they match, and fails
// required outputs that match nothing.
func (p *promotion) match(entries []Entry) {
	matched := make([]bool, len(p.rules.Outputs))
	for _, e := range entries {
		if e.Mode.IsDir() {
			continue
		}
		var c *candidate
		for i := range p.rules.Outputs {
			o := &p.rules.Outputs[i]
			if !o.glob.match(e.Path) {
				continue
			}
			matched[i] = true
			if c == nil {
				c = &candidate{entry: e}
				p.cands = append(p.cands, c)
			}
			c.rules = append(c.rules, o)
			p.pass(c, o, "glob", "matched")
		}
	}
	for i, ok := range matched {
		if o := &p.rules.Outputs[i]; !ok && o.Required {
			p.fail(nil, o, "required", "no file in the workspace matches")
		}
	}
}

// static runs the checks that need only the listing: regular files only,
// no hard links, size.
func (p *promotion) static(c *candidate) {
	e := c.entry
	for _, o := range c.rules {
		switch {
		case e.Mode&os.ModeSymlink != 0:
			p.fail(c, o, "regular_file", "is a symlink (-> %s); links are never promoted", e.Target)
			continue
		case !e.Mode.IsRegular():
			p.fail(c, o, "regular_file", "is a %s; only regular files are promoted", fsmode.Describe(e.Mode))
			continue
		}
		p.pass(c, o, "regular_file", "")
		switch {
		case e.Nlink == 0:
			p.fail(c, o, "hard_links", "link count unknown (%s); a file that may be hard-linked is not promoted", e.Note)
		case e.Nlink > 1:
			p.fail(c, o, "hard_links", "has %d hard links; it may be (a link to) a file from outside the workspace", e.Nlink)
		default:
			p.pass(c, o, "hard_links", "1 link")
		}
		if o.MaxSize > 0 && e.Size > int64(o.MaxSize) {
			p.fail(c, o, "max_size", "is %d bytes, over the limit of %s", e.Size, o.MaxSize)
		}
	}
}

// limit is the smallest max_size of c's rules, or -1.
func (c *candidate) limit() int64 {
	l := int64(-1)
	for _, o := range c.rules {
		if o.MaxSize > 0 && (l < 0 || int64(o.MaxSize) < l) {
			l = int64(o.MaxSize)
		}
	}
	return l
}

// stage copies c into the staging dir, hashing and sniffing as it goes,
// then re-hashes the copy. Violations are recorded; an error is returned
// only when staging itself breaks (disk full, I/O error).
func (p *promotion) stage(c *candidate, staging string) error {
	rc, opened, err := p.src.Open(p.ctx, c.entry.Path)
	if err != nil {
		p.fail(c, c.rules[0], "regular_file", "cannot be opened safely: %v", err)
		return nil
	}
	defer rc.Close()
	if opened.Nlink > 1 {
		p.fail(c, c.rules[0], "hard_links", "has %d hard links now", opened.Nlink)
		return nil
	}
	c.staged = filepath.Join(staging, filepath.FromSlash(c.entry.Path))
	if err := os.MkdirAll(filepath.Dir(c.staged), 0o755); err != nil {
		return fmt.Errorf("artifact: stage %s: %w", c.entry.Path, err)
	}
	f, err := os.OpenFile(c.staged, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("artifact: stage %s: %w", c.entry.Path, err)
	}
	h := sha256.New()
	s := &sniffer{}
	r := io.Reader(rc)
	lim := c.limit()
	if lim >= 0 {
		r = io.LimitReader(rc, lim+1)
	}
	n, err := io.Copy(io.MultiWriter(f, h, s), r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("artifact: copy %s: %w", p.src.Where(c.entry.Path), err)
	}
	if lim >= 0 && n > lim {
		for _, o := range c.rules {
			if o.MaxSize > 0 && n > int64(o.MaxSize) {
				p.fail(c, o, "max_size", "grew past the limit of %s while being copied", o.MaxSize)
			}
		}
		return nil
	}
	c.size, c.sum = n, hex.EncodeToString(h.Sum(nil))
	again, err := hashFile(c.staged, sha256.New())
	if err != nil {
		return fmt.Errorf("artifact: re-hash staged %s: %w", c.entry.Path, err)
	}
	if again != c.sum {
		p.fail(c, c.rules[0], "sha256", "staged copy hashes to %s, the bytes read to %s", again, c.sum)
		return nil
	}
	c.det = detect(s, c.staged)
	for _, o := range c.rules {
		if o.MaxSize > 0 {
			p.pass(c, o, "max_size", "%d bytes <= %s", n, o.MaxSize)
		}
	}
	return nil
}

// content runs the checks on the staged bytes that need no session:
// types and schema.
func (p *promotion) content(c *candidate) {
	for _, o := range c.rules {
		if len(o.Types) > 0 {
			if t := typeAllowed(o.Types, c.det.Satisfies); t != "" {
				if c.acceptedAs == "" {
					c.acceptedAs = t
				}
				p.pass(c, o, "types", "content is valid %s", t)
			} else {
				why := ""
				if c.det.NotText != "" {
					why = ": " + c.det.NotText
				}
				p.fail(c, o, "types", "content is %s%s; allowed: %s", c.det.Type, why, strings.Join(o.Types, ", "))
			}
		}
		if o.schema != nil {
			if msgs := validateSchema(o.schema, c.staged); len(msgs) > 0 {
				p.fail(c, o, "json_schema", "%s: %s", o.JSONSchema, strings.Join(msgs, "; "))
			} else {
				p.pass(c, o, "json_schema", "valid against %s", o.JSONSchema)
			}
		}
	}
}

// validate runs the rules' validate commands on the staged copies, in a
// fresh session (PromoteOptions.NewSession says why) whose workspace
// holds every staged file at its workspace path, so that a command can
// also read the other outputs.
func (p *promotion) validate() {
	var staged, todo []*candidate
	for _, c := range p.cands {
		if c.sum == "" {
			continue // refused before its bytes were staged
		}
		staged = append(staged, c)
		if slices.ContainsFunc(c.rules, func(o *Output) bool { return o.Validate != "" }) {
			todo = append(todo, c)
		}
	}
	if len(todo) == 0 {
		return
	}
	failAll := func(format string, args ...any) {
		for _, c := range todo {
			for _, o := range c.rules {
				if o.Validate != "" {
					p.fail(c, o, "validate", "command %q was not run: "+format, append([]any{o.Validate}, args...)...)
				}
			}
		}
	}
	if p.opts.NewSession == nil {
		failAll("no session was given to run it in, and an unchecked rule does not pass")
		return
	}
	s, err := p.opts.NewSession(p.ctx)
	if err != nil {
		failAll("start a session to run it in: %v", err)
		return
	}
	defer s.Close(context.WithoutCancel(p.ctx))
	for _, c := range staged {
		data, err := os.ReadFile(c.staged)
		if err == nil {
			err = s.WriteFile(p.ctx, c.entry.Path, data, 0o644)
		}
		if err != nil {
			failAll("copy %s into the session: %v", c.entry.Path, err)
			return
		}
	}
	for _, c := range todo {
		for _, o := range c.rules {
			if o.Validate != "" {
				p.validateOne(s, c, o)
			}
		}
	}
}

// validateOne runs o.Validate in s for c's copy there, and checks that
// the copy is still the staged bytes afterwards.
func (p *promotion) validateOne(s sandbox.Session, c *candidate, o *Output) {
	where := sandboxPath(s, c.entry.Path)
	res, err := sandbox.Exec(p.ctx, s, sandbox.ExecRequest{
		Cmd:     []string{"/bin/sh", "-c", o.Validate, "sh", where},
		Env:     map[string]string{"ARTIFACT": where},
		Timeout: p.opts.ValidateTimeout,
	})
	switch {
	case err != nil:
		p.fail(c, o, "validate", "command %q could not run: %v", o.Validate, err)
		return
	case res.TimedOut:
		p.fail(c, o, "validate", "command %q timed out after %s", o.Validate, p.opts.ValidateTimeout)
		return
	case res.ExitCode != 0:
		p.fail(c, o, "validate", "command %q exited %d: %s", o.Validate, res.ExitCode, tail(res.Stderr, res.Stdout))
		return
	}
	data, err := s.ReadFile(p.ctx, c.entry.Path)
	if err == nil {
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != c.sum {
			err = fmt.Errorf("its sha256 is now %x, was %s", sum, c.sum)
		}
	}
	if err != nil {
		p.fail(c, o, "validate", "the file changed while %q ran: %v", o.Validate, err)
		return
	}
	p.pass(c, o, "validate", "%q exited 0", o.Validate)
}

// sandboxPath is rel's path inside the session.
func sandboxPath(s sandbox.Session, rel string) string {
	root := s.State().Spec.Workdir
	if root == "" {
		root = sandbox.DefaultWorkdir
	}
	return root + "/" + rel
}

// FreshSessionLike is a PromoteOptions.NewSession that creates, with c, a
// session like s (its image, mounts, environment, user and policy) on an
// empty workspace of its own: none of s's files and none of its
// processes.
func FreshSessionLike(c sandbox.Client, s sandbox.Session) func(context.Context) (sandbox.Session, error) {
	return func(ctx context.Context) (sandbox.Session, error) {
		spec := s.State().Spec
		spec.Workspace, spec.Snapshot = "", ""
		return c.Create(ctx, spec)
	}
}
