package egress

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/sandbox"
)

// ruleGroup is the rules written for one host entry. A request must match
// one rule of every group whose host admits it: rules for one entry widen
// each other, while a group for another entry (an operator's and a
// caller's, say) only narrows.
type ruleGroup struct {
	host  pattern
	rules []sandbox.RequestRule
}

// parseRules groups rules by host entry, checking each against the
// allow-list.
func (p *Proxy) parseRules(rules []sandbox.RequestRule) ([]ruleGroup, error) {
	var groups []ruleGroup
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return nil, err
		}
		pat, err := parsePattern(r.Host)
		if err != nil {
			return nil, err
		}
		if !p.covers(pat) {
			return nil, sandbox.Errorf(sandbox.ErrInvalid, "egress: request rule for %q, which the allow-list does not admit", r.Host)
		}
		i := slices.IndexFunc(groups, func(g ruleGroup) bool { return strings.EqualFold(g.host.raw, r.Host) })
		if i < 0 {
			groups = append(groups, ruleGroup{host: pat})
			i = len(groups) - 1
		}
		groups[i].rules = append(groups[i].rules, r)
	}
	return groups, nil
}

// admits reports whether pat names t (host, and port when it has one).
func (pat pattern) admits(t target) bool {
	return pat.matchesHost(t) && pat.matchesPort(t)
}

// checkRules returns why a request for t with method and (escaped) path
// is refused by the request rules, or "".
func (p *Proxy) checkRules(t target, method, escapedPath string) string {
	var applied []ruleGroup
	for _, g := range p.rules {
		if g.host.admits(t) {
			applied = append(applied, g)
		}
	}
	if len(applied) == 0 {
		return ""
	}
	if why := nonCanonical(escapedPath); why != "" {
		return "path " + escapedPath + " " + why + "; the request rules for " + t.host + " match canonical paths only"
	}
	for _, g := range applied {
		if !slices.ContainsFunc(g.rules, func(r sandbox.RequestRule) bool { return ruleMatches(r, method, escapedPath) }) {
			shown := make([]string, len(g.rules))
			for i, r := range g.rules {
				shown[i] = r.String()
			}
			return fmt.Sprintf("%s %s matches no request rule for %s (%s)", method, escapedPath, g.host.raw, strings.Join(shown, "; "))
		}
	}
	return ""
}

// nonCanonical says what makes a path one a server might read as another
// (a dot segment, an encoded slash or backslash), or "". Rules are
// matched on the path as sent; these forms would let "/repos/acme/../x"
// pass a rule for /repos/acme/** and reach /x.
func nonCanonical(escaped string) string {
	if !strings.HasPrefix(escaped, "/") {
		return "is not absolute"
	}
	lower := strings.ToLower(escaped)
	for _, bad := range []string{"%2f", "%5c", "\\", "%2e"} {
		if strings.Contains(lower, bad) {
			return "holds " + bad
		}
	}
	for _, seg := range strings.Split(escaped, "/") {
		if seg == "." || seg == ".." {
			return "has a dot segment"
		}
	}
	return ""
}

func ruleMatches(r sandbox.RequestRule, method, escapedPath string) bool {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
		return false
	}
	if len(r.Paths) == 0 {
		return true
	}
	return slices.ContainsFunc(r.Paths, func(glob string) bool { return globMatch(glob, escapedPath) })
}

// globMatch matches a path against a glob whose "**" segment stands for
// any number of segments (none included) and whose other segments are
// path.Match patterns ("*" within one segment).
func globMatch(glob, p string) bool {
	return segsMatch(strings.Split(glob, "/"), strings.Split(p, "/"))
}

func segsMatch(g, s []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			if len(g) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if segsMatch(g[1:], s[i:]) {
					return true
				}
			}
			return false
		}
		if len(s) == 0 {
			return false
		}
		if ok, err := path.Match(g[0], s[0]); err != nil || !ok {
			return false
		}
		g, s = g[1:], s[1:]
	}
	return len(s) == 0
}
