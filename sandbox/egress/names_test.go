package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// resolverLog is a test Dial hook standing for the host's resolver: it
// records every name the proxy would have resolved and fails the dial
// (the client then gets a 502, not a refusal).
type resolverLog struct {
	mu    sync.Mutex
	names map[string]int
}

func (r *resolverLog) dial(_ context.Context, _, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string]int{}
	}
	r.names[host]++
	return nil, errors.New("test resolver: no such host")
}

func (r *resolverLog) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.names)
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// startNameProxy serves a proxy allowing *.exfil.test and
// api.exfil.test, on a fake clock, whose resolutions res records.
func startNameProxy(t *testing.T, lim NameLimits) (*Proxy, string, *resolverLog, *fakeClock) {
	t.Helper()
	res := &resolverLog{}
	p, addr := startProxy(t, Config{Allow: []string{"*.exfil.test", "api.exfil.test"}, Names: lim, Dial: res.dial})
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	p.names.now = clock.now
	p.names.last = clock.now()
	return p, addr, res, clock
}

func connectStatus(t *testing.T, addr, host string) (int, string) {
	t.Helper()
	return rawRequest(t, addr, "CONNECT "+host+":443 HTTP/1.1\r\nHost: x\r\n\r\n")
}

func TestNamesAWildcardAdmitsAreBounded(t *testing.T) {
	tests := []struct {
		name   string
		host   string
		status int
		reason string
	}{
		{"a short name under the wildcard is resolved", "cdn.exfil.test", http.StatusBadGateway, ""},
		{"a label longer than the bound is refused", strings.Repeat("a", DefaultMaxLabel+1) + ".exfil.test", http.StatusForbidden, "a label of 41 bytes"},
		{"a label longer than the bound is refused deeper down too", "x." + strings.Repeat("b", 50) + ".exfil.test", http.StatusForbidden, "a label of 50 bytes"},
		{"a name longer than the bound is refused", strings.Repeat("c123456789.", 9) + "exfil.test", http.StatusForbidden, "over the 100"},
		{"a name listed exactly is not bounded", "api.exfil.test", http.StatusBadGateway, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, addr, res, _ := startNameProxy(t, NameLimits{})
			code, body := connectStatus(t, addr, tt.host)
			if code != tt.status || !strings.Contains(body, tt.reason) {
				t.Fatalf("CONNECT %s: %d %q, want %d with %q", tt.host, code, body, tt.status, tt.reason)
			}
			if tt.reason == "" {
				return
			}
			if res.distinct() != 0 {
				t.Errorf("a refused name was resolved: %v", res.names)
			}
			if !containsDenial(p.Denials(), tt.host, tt.reason) {
				t.Errorf("the refusal is not recorded as a violation: %q", p.Denials())
			}
		})
	}
}

// The attack: a loop that encodes data in names under the wildcard.
// Only MaxNames distinct names ever reach the resolver, however long the
// loop runs, and every one beyond is a recorded refusal.
func TestDistinctNamesPerSessionAreBounded(t *testing.T) {
	p, addr, res, clock := startNameProxy(t, NameLimits{MaxNames: 5, Burst: 100})
	for i := range 8 {
		clock.add(time.Second)
		code, _ := connectStatus(t, addr, fmt.Sprintf("chunk%d.exfil.test", i))
		if want := map[bool]int{true: http.StatusBadGateway, false: http.StatusForbidden}[i < 5]; code != want {
			t.Errorf("name %d: status %d, want %d", i, code, want)
		}
	}
	if n := res.distinct(); n != 5 {
		t.Errorf("%d distinct names reached the resolver, want 5", n)
	}
	if !containsDenial(p.Denials(), "chunk7.exfil.test", "5 distinct names") {
		t.Errorf("no violation names the bound: %q", p.Denials())
	}
	// A name already admitted says nothing new and stays usable.
	if code, _ := connectStatus(t, addr, "chunk1.exfil.test"); code != http.StatusBadGateway {
		t.Errorf("an admitted name after the bound: status %d, want 502", code)
	}
	if code, _ := connectStatus(t, addr, "api.exfil.test"); code != http.StatusBadGateway {
		t.Errorf("an exactly listed name after the bound: status %d, want 502", code)
	}
}

func TestNewNamesComeAtABoundedRate(t *testing.T) {
	p, addr, res, clock := startNameProxy(t, NameLimits{Burst: 3, Every: time.Second})
	statuses := func(first, n int) []int {
		var out []int
		for i := first; i < first+n; i++ {
			code, _ := connectStatus(t, addr, fmt.Sprintf("n%d.exfil.test", i))
			out = append(out, code)
		}
		return out
	}
	if got := statuses(0, 5); fmt.Sprint(got) != "[502 502 502 429 429]" {
		t.Errorf("a burst of 5 new names: %v, want 3 resolved then 2 refused", got)
	}
	clock.add(2 * time.Second)
	if got := statuses(10, 3); fmt.Sprint(got) != "[502 502 429]" {
		t.Errorf("2 s later: %v, want 2 resolved then refused", got)
	}
	if n := res.distinct(); n != 5 {
		t.Errorf("%d names reached the resolver, want 5", n)
	}
	if !containsDenial(p.Denials(), "n3.exfil.test", "faster than one per 1s") {
		t.Errorf("no violation names the rate: %q", p.Denials())
	}
}

// Plain HTTP goes through the same gate as CONNECT.
func TestPlainHTTPNamesAreBoundedToo(t *testing.T) {
	p, addr, res, _ := startNameProxy(t, NameLimits{})
	host := strings.Repeat("d", 60) + ".exfil.test"
	code, _ := rawRequest(t, addr, "GET http://"+host+"/ HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	if code != http.StatusForbidden || res.distinct() != 0 {
		t.Errorf("status %d, %d names resolved; want 403 and none", code, res.distinct())
	}
	if !containsDenial(p.Denials(), "GET", host) {
		t.Errorf("denials %q", p.Denials())
	}
}
