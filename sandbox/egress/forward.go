package egress

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strings"
)

// serveForward forwards a plain-HTTP request with an absolute-form URI.
func (p *Proxy) serveForward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Scheme != "http" {
		p.refuse(w, r, r.URL.Host, http.StatusBadRequest,
			"only http:// URIs are forwarded; use CONNECT for "+r.URL.Scheme)
		return
	}
	t, err := parseTarget(r.URL.Host, 80)
	if err != nil {
		p.refuse(w, r, r.URL.Host, http.StatusBadRequest, "bad target: "+err.Error())
		return
	}
	if status, err := p.admit(t); err != nil {
		p.refuse(w, r, t.String(), status, err.Error())
		return
	}
	if status, why := p.checkRequest(r, t); why != "" {
		p.refuse(w, r, t.String(), status, why)
		return
	}
	r = r.WithContext(withTarget(r.Context(), t))
	p.scanBody(r, t)
	p.forward.ServeHTTP(w, r)
}

// reverseProxy forwards through tr with rewrite, scrubbing what comes
// back.
func (p *Proxy) reverseProxy(rewrite func(*httputil.ProxyRequest), tr http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      tr,
		ModifyResponse: p.scrubResponse,
		ErrorHandler:   p.forwardError,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
}

// rewriteTo builds the upstream request over scheme (http for plain
// forwarding, https for an inspected host), leaving defaultPort out of
// the URL. ReverseProxy has already removed hop-by-hop headers
// (Connection and what it lists, Proxy-Connection, Proxy-Authorization,
// Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade unless it is a
// protocol switch) and, because Rewrite is set, any X-Forwarded-* the
// sandbox sent.
func (p *Proxy) rewriteTo(scheme string, defaultPort int) func(*httputil.ProxyRequest) {
	return func(pr *httputil.ProxyRequest) {
		t, _ := targetFrom(pr.In.Context())
		out := pr.Out
		out.URL.Scheme = scheme
		out.URL.Host = t.String()
		if t.port == defaultPort {
			out.URL.Host = t.hostForURL()
		}
		// The Host header is what a shared front end routes on; letting
		// the sandbox choose it would reach unlisted sites behind a listed
		// IP.
		out.Host = ""
		out.Header.Del("Proxy-Authorization")
		out.Header.Del("Proxy-Connection")
		out.RequestURI = ""
		p.injectCredentials(out, t)
	}
}

// scrubResponse drops response headers that would carry an injected
// credential back into the sandbox (a server reflecting Authorization in
// a header, say).
func (p *Proxy) scrubResponse(resp *http.Response) error {
	t, _ := targetFrom(resp.Request.Context())
	secrets := p.secretValues(t)
	if len(secrets) == 0 {
		return nil
	}
	for name, vs := range resp.Header {
		for _, v := range vs {
			if containsAny(v, secrets) {
				resp.Header.Del(name)
				break
			}
		}
	}
	for name, vs := range resp.Trailer {
		for _, v := range vs {
			if containsAny(v, secrets) {
				resp.Trailer.Del(name)
				break
			}
		}
	}
	return nil
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// forwardError turns a dial-time refusal into 403 and any other upstream
// failure into 502.
func (p *Proxy) forwardError(w http.ResponseWriter, r *http.Request, err error) {
	t, _ := targetFrom(r.Context())
	var leak *errPlaceholderInBody
	if errors.As(err, &leak) {
		// Headers may be gone already (a streamed body); the refusal is
		// recorded either way and the upstream request was cut before
		// the placeholder's bytes.
		p.refuse(w, r, t.String(), http.StatusForbidden, leak.reason)
		return
	}
	var d *deniedError
	if errors.As(err, &d) {
		p.refuse(w, r, t.String(), http.StatusForbidden, d.reason)
		return
	}
	p.upstreamFailed(w, r, t.String(), err)
}

// upstreamFailed answers 502 (504 on a timeout) for an allowed request
// whose upstream could not be reached, or 403 when dialling refused it.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, host string, err error) {
	var d *deniedError
	if errors.As(err, &d) {
		p.refuse(w, r, host, http.StatusForbidden, d.reason)
		return
	}
	err = errUpstream(err)
	status := http.StatusBadGateway
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		status = http.StatusGatewayTimeout
	}
	p.log.Info("egress upstream failed", "method", r.Method, "host", host, "err", err)
	http.Error(w, "agentbox egress proxy: "+host+": "+err.Error(), status)
}
