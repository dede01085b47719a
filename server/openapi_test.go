package server

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The served schema lists every route the handler has, with its method,
// and no route it does not have.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	routed := map[string]bool{}
	s := &Server{}
	mux := &recordingMux{routes: routed}
	s.routes(mux)
	for r := range routed {
		if !documented[r] {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for d := range documented {
		if !routed[d] {
			t.Errorf("openapi.json documents %s, which is not routed", d)
		}
	}
}

type recordingMux struct{ routes map[string]bool }

var method = regexp.MustCompile(`^[A-Z]+ /`)

func (m *recordingMux) Handle(pattern string, _ http.Handler) {
	if method.MatchString(pattern) {
		m.routes[pattern] = true
	}
}

func (m *recordingMux) HandleFunc(pattern string, _ func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, nil)
}
