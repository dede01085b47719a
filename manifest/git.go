package manifest

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// remoteSchemes are the URL schemes git_repo may clone from (trusted
// manifests); untrusted ones get https only. Transports that run commands
// (ext::, fd::) are never allowed.
var remoteSchemes = map[string]bool{"https": true, "http": true, "ssh": true, "git": true}

// commitRef matches an abbreviated or full commit id.
var commitRef = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

// isRemoteURL tells a URL from a local path; scp-like "host:path" forms
// count as remote (ssh).
func isRemoteURL(u string) bool {
	if strings.Contains(u, "://") {
		return !strings.HasPrefix(u, "file://")
	}
	i := strings.IndexByte(u, ':')
	return i > 0 && !strings.ContainsRune(u[:i], '/')
}

func (v *validator) gitRepo(where string, p *planned) {
	g := p.entry.GitRepo
	switch r := g.Ref; {
	case strings.HasPrefix(r, "-"), strings.ContainsAny(r, " \t\n\r\x00\\~^:?*["), strings.Contains(r, ".."):
		v.ps.add(errInvalid, where, "git_repo ref %q is not a valid branch, tag or commit name", r)
	}
	if g.Timeout < 0 {
		v.ps.add(errInvalid, where, "git_repo timeout %s is negative", time.Duration(g.Timeout))
	}
	u := g.URL
	switch {
	case u == "":
		v.ps.add(errInvalid, where, "git_repo url is empty")
		return
	case strings.HasPrefix(u, "-"):
		v.ps.add(errInvalid, where, "git_repo url %q starts with '-'", u)
		return
	case strings.Contains(u, "::"):
		v.ps.add(errInvalid, where, "git_repo url %q uses a transport helper (\"::\"), which is not allowed", u)
		return
	}
	if !isRemoteURL(u) {
		local := strings.TrimPrefix(u, "file://")
		if real, ok := v.hostSource(where, "git_repo url", local, true); ok {
			p.src = real
			p.url = "file://" + real // file:// so that --depth applies
		}
		return
	}
	scheme := "ssh"
	if i := strings.Index(u, "://"); i >= 0 {
		parsed, err := url.Parse(u)
		if err != nil {
			v.ps.add(errInvalid, where, "git_repo url %q: %v", u, err)
			return
		}
		scheme = parsed.Scheme
		if parsed.User != nil {
			if _, hasPw := parsed.User.Password(); hasPw {
				v.ps.add(errInvalid, where, "git_repo url carries a password; credentials do not belong in a manifest")
				return
			}
		}
	}
	if !remoteSchemes[scheme] {
		v.ps.add(errInvalid, where, "git_repo url %q: scheme %q is not allowed (use https, http, ssh or git)", u, scheme)
		return
	}
	if !v.opts.Trusted && scheme != "https" {
		v.ps.add(errInvalid, where, "git_repo url %q: an untrusted manifest may only clone over https", u)
		return
	}
	p.url = u
}

// gitEnv is the whole environment git runs with: no prompts, no user or
// system configuration (so no credential helper), and only plain
// transports.
func gitEnv() []string {
	env := []string{
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ALLOW_PROTOCOL=file:https:http:ssh:git",
		"HOME=/nonexistent",
		"LC_ALL=C",
	}
	if p, ok := os.LookupEnv("PATH"); ok {
		env = append(env, "PATH="+p)
	}
	return env
}

// clone clones url at ref into dest (which must not exist) within timeout.
// A commit id is fetched by id (depth 1 when the server allows it); a
// branch or tag is cloned with --depth 1 --branch.
func clone(ctx context.Context, url, ref, dest string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultGitTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	git := func(dir string, args ...string) error {
		full := append([]string{"-c", "credential.helper=", "-c", "protocol.ext.allow=never", "-c", "core.hooksPath=/dev/null"}, args...)
		cmd := exec.CommandContext(ctx, "git", full...)
		cmd.Dir = dir
		cmd.Env = gitEnv()
		cmd.WaitDelay = 2 * time.Second
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return sandbox.Errorf(sandbox.ErrTimeout, "git %s: gave up after %s", args[0], timeout)
			}
			msg := strings.TrimSpace(stderr.String())
			if len(msg) > 500 {
				msg = msg[:500] + "…"
			}
			return fmt.Errorf("git %s: %w: %s", args[0], err, msg)
		}
		return nil
	}
	if !commitRef.MatchString(ref) {
		args := []string{"clone", "--quiet", "--depth", "1", "--no-tags"}
		if ref != "" {
			args = append(args, "--branch", ref)
		}
		return git(filepath.Dir(dest), append(args, "--", url, dest)...)
	}
	if err := os.Mkdir(dest, 0o755); err != nil {
		return err
	}
	for _, s := range [][]string{{"init", "--quiet"}, {"remote", "add", "origin", "--", url}} {
		if err := git(dest, s...); err != nil {
			return err
		}
	}
	// A full commit id can be fetched alone when the server allows it
	// (protocol v2 and local repositories do); an abbreviated one, or a
	// server that refuses, needs the whole history to find it.
	if len(ref) < 40 || git(dest, "fetch", "--quiet", "--depth", "1", "origin", ref) != nil {
		if err := git(dest, "fetch", "--quiet", "origin"); err != nil {
			return err
		}
	}
	return git(dest, "checkout", "--quiet", "--detach", ref)
}
