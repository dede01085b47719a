package egress

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Threat: a wildcard entry (*.example.com) lets the sandbox choose the
// names the proxy resolves, and resolving a name sends it through the
// host's resolver to the zone's name servers and every resolver on the
// way: "c2VjcmV0.example.com" carries "secret" out even when nothing is
// ever connected. The bounds below make that channel narrow and loud: the
// labels and names a sandbox picks are short, only so many distinct ones
// are resolved per session, at a bounded rate, and every one refused is a
// recorded violation. Names listed exactly, and names already admitted,
// are not bounded: they say nothing new.

// NameLimits bound the host names a sandbox picks under wildcard entries.
// Zero fields take the defaults below.
type NameLimits struct {
	// MaxLabel bounds each label of the part of a name a wildcard matched.
	MaxLabel int
	// MaxName bounds the whole name.
	MaxName int
	// MaxNames bounds the distinct names admitted through wildcard entries
	// over the proxy's life (a session).
	MaxNames int
	// Burst new names may come at once; after that, one per Every.
	Burst int
	Every time.Duration
}

// Defaults of NameLimits: ample for package mirrors and CDNs (a few hosts
// each), and together a few KiB per session through names.
const (
	DefaultMaxLabel = 40
	DefaultMaxName  = 100
	DefaultMaxNames = 64
	DefaultBurst    = 16
	DefaultEvery    = time.Second
)

func (l NameLimits) withDefaults() NameLimits {
	if l.MaxLabel <= 0 {
		l.MaxLabel = DefaultMaxLabel
	}
	if l.MaxName <= 0 {
		l.MaxName = DefaultMaxName
	}
	if l.MaxNames <= 0 {
		l.MaxNames = DefaultMaxNames
	}
	if l.Burst <= 0 {
		l.Burst = DefaultBurst
	}
	if l.Every <= 0 {
		l.Every = DefaultEvery
	}
	return l
}

// nameGate admits the names wildcard entries match, within NameLimits.
type nameGate struct {
	lim NameLimits
	now func() time.Time

	mu     sync.Mutex
	seen   map[string]bool
	tokens float64 // new names that may come now, up to Burst
	last   time.Time
}

func newNameGate(lim NameLimits, now func() time.Time) *nameGate {
	lim = lim.withDefaults()
	return &nameGate{lim: lim, now: now, seen: map[string]bool{}, tokens: float64(lim.Burst), last: now()}
}

// admit decides on host, which only the wildcard entry w admits. It
// returns the HTTP status and reason of a refusal, or 0 and nil.
func (g *nameGate) admit(host string, w pattern) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[host] {
		return 0, nil
	}
	picked := strings.TrimSuffix(host, "."+w.host)
	if len(host) > g.lim.MaxName {
		return http.StatusForbidden, fmt.Errorf("name %s has %d bytes, over the %d a name under %s may have (names a sandbox picks are bounded: resolving one sends it out); list the name itself to allow it", host, len(host), g.lim.MaxName, w.raw)
	}
	for _, label := range strings.Split(picked, ".") {
		if len(label) > g.lim.MaxLabel {
			return http.StatusForbidden, fmt.Errorf("name %s has a label of %d bytes, over the %d a name under %s may have (names a sandbox picks are bounded: resolving one sends it out); list the name itself to allow it", host, len(label), g.lim.MaxLabel, w.raw)
		}
	}
	if len(g.seen) >= g.lim.MaxNames {
		return http.StatusForbidden, fmt.Errorf("name %s: this session already had the %d distinct names wildcard entries may admit (each one the sandbox picks is a message through DNS); list the name itself to allow it", host, g.lim.MaxNames)
	}
	now := g.now()
	g.tokens += float64(now.Sub(g.last)) / float64(g.lim.Every)
	g.last = now
	if max := float64(g.lim.Burst); g.tokens > max {
		g.tokens = max
	}
	if g.tokens < 1 {
		return http.StatusTooManyRequests, fmt.Errorf("name %s: new names under wildcard entries come faster than one per %s after %d (each one the sandbox picks is a message through DNS); retry later", host, g.lim.Every, g.lim.Burst)
	}
	g.tokens--
	g.seen[host] = true
	return 0, nil
}
