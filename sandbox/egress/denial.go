package egress

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// refuse answers a request the proxy will not carry, logs it and records
// it for Denials. reason must not contain a credential.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, host string, status int, reason string) {
	p.record(r.Method, host, reason)
	allowed := make([]string, len(p.allow))
	for i, a := range p.allow {
		allowed[i] = a.raw
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Agentbox-Egress", "refused")
	w.Header().Set(ReasonHeader, strings.Map(headerSafe, reason))
	w.WriteHeader(status)
	fmt.Fprintf(w, "agentbox egress proxy refused %s %s: %s (allowed: %s)\n",
		r.Method, strconv.Quote(host), reason, strings.Join(allowed, ", "))
}

// ReasonHeader carries a refusal's reason, for clients that read headers
// rather than bodies.
const ReasonHeader = "X-Agentbox-Egress-Reason"

// headerSafe drops control characters from a header value.
func headerSafe(r rune) rune {
	if r < ' ' || r == 0x7f {
		return -1
	}
	return r
}

// Denial is one refusal of the proxy.
type Denial struct {
	Time   time.Time
	Method string // CONNECT, GET, ... or DNS
	Host   string
	Reason string
}

// String is the refusal as a command's violation names it:
// METHOD "HOST": REASON (the command's own times frame it).
func (d Denial) String() string {
	return fmt.Sprintf("%s %s: %s", d.Method, strconv.Quote(d.Host), d.Reason)
}

// record keeps one refusal and logs it.
func (p *Proxy) record(method, host, reason string) {
	d := Denial{Time: time.Now().UTC(), Method: method, Host: host, Reason: reason}
	p.mu.Lock()
	if len(p.denials) >= maxDenials {
		copy(p.denials, p.denials[1:])
		p.denials = p.denials[:len(p.denials)-1]
	}
	p.denials = append(p.denials, d)
	p.refused++
	p.mu.Unlock()
	p.log.Warn("egress refused", "method", method, "host", host, "reason", reason)
}

// Refused counts the refusals so far, for a later DenialsSince.
func (p *Proxy) Refused() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// DenialsSince returns the refusals after the first n (a count Refused
// returned), oldest first: those of one command. Of a command with more
// than 1000 only the latest 1000 are kept; every one was also logged.
func (p *Proxy) DenialsSince(n uint64) []Denial {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n >= p.refused {
		return nil
	}
	k := min(p.refused-n, uint64(len(p.denials)))
	return slices.Clone(p.denials[uint64(len(p.denials))-k:])
}

// Denials returns the refusals kept, oldest first (the latest 1000).
func (p *Proxy) Denials() []Denial { return p.DenialsSince(0) }
