package agent

import (
	"bufio"
	"encoding/json"
	"io"
	"testing"

	"github.com/agentbox/agentbox/trace"
)

func readTrace(t *testing.T, r io.Reader) []trace.Event {
	t.Helper()
	var evs []trace.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e trace.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		t.Fatal("empty trace")
	}
	return evs
}
