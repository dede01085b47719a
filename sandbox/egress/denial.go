package egress

import (
	"fmt"
	"net/http"
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

// record keeps one refusal and logs it.
func (p *Proxy) record(method, host, reason string) {
	now := time.Now().UTC()
	entry := fmt.Sprintf("%s %s %s: %s", now.Format(time.RFC3339), method, strconv.Quote(host), reason)
	p.mu.Lock()
	if len(p.denials) >= maxDenials {
		copy(p.denials, p.denials[1:])
		p.denials = p.denials[:len(p.denials)-1]
	}
	p.denials = append(p.denials, entry)
	p.mu.Unlock()
	p.log.Warn("egress refused", "method", method, "host", host, "reason", reason)
}

// Denials returns the refusals so far, oldest first, each as
// "TIME METHOD "HOST": REASON". At most the latest 1000 are kept; every one
// was also logged.
func (p *Proxy) Denials() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.denials...)
}
