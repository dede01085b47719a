package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// allowList writes an allow-list file and returns its path.
func allowList(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "skips.allow")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTheReport(t *testing.T) {
	const both = `# comment
a | TestSkip | no loop devices here | the test host has none
a | TestSub/a_b | the backend does not claim pty | no terminals by design
`
	tests := []struct {
		name, input, allow string
		code               int
		want, notWant      []string
	}{
		{"passes when every skip is on the allow-list", "run.json", both, 0,
			[]string{"ok    a\t0.0s", "2 skipped (2 on the allow-list)", "by line 2: the test host has none\n    a TestSkip: no loop devices here\n"},
			[]string{"NOT allowed", "empty"}},
		{"fails on a skip the allow-list does not name, and says which", "run.json", "a | TestSkip | no loop devices here | the test host has none\n", exitSkipped,
			[]string{"NOT allowed", "a | TestSub/a_b | the backend does not claim pty"},
			[]string{"a | TestSkip |"}},
		{"fails on a skip whose reason differs from the allowed one", "run.json", "a | TestSkip | no loop devices | x\na | TestSub/a_b | the backend does not claim pty | y\n", exitSkipped,
			[]string{"a | TestSkip | no loop devices here"}, nil},
		{"takes * in a test name or reason as any text", "run.json", "a | TestS* | no * here | x\na | TestSub/* | the backend does not claim * | y\n", 0, nil, []string{"NOT allowed"}},
		{"fails on a failed test and prints its output", "fail.json", "", exitFailed,
			[]string{"m_test.go:9: got 2, want 3", "--- FAIL: TestBad", "failed:\n  . TestBad\n  ."}, nil},
		{"fails on a build failure and prints the compiler's output", "buildfail.json", "", exitFailed,
			[]string{"undefined: x", "failed:\n  broken"}, nil},
		{"fails on a test that never finished", "crash.json", "", exitFailed,
			[]string{"=== RUN   TestHangs", ". TestHangs (never finished)"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := os.Open(filepath.Join("testdata", tt.input))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			events := filepath.Join(t.TempDir(), "out", "events.json")
			var out bytes.Buffer
			code := run(in, &out, allowList(t, tt.allow), events, "example.com/m")
			if code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q", w)
				}
			}
			raw, _ := os.ReadFile(events)
			orig, _ := os.ReadFile(filepath.Join("testdata", tt.input))
			if !bytes.Equal(raw, orig) {
				t.Errorf("the events file is not the input as read")
			}
			if t.Failed() {
				t.Logf("output:\n%s", out.String())
			}
		})
	}
}

func TestNoEventsFail(t *testing.T) {
	var out bytes.Buffer
	if code := run(strings.NewReader("go: unknown flag\n"), &out, allowList(t, ""), "", "example.com/m"); code != exitFailed {
		t.Errorf("exit code %d on no events, want 1", code)
	}
	if !strings.Contains(out.String(), "go: unknown flag") {
		t.Errorf("a line that is not an event was not printed: %q", out.String())
	}
}

func TestAnAllowListLineWithoutAWhyIsRefused(t *testing.T) {
	for _, line := range []string{"a | TestX | reason |", "a | TestX | reason", "a | TestX | reason | why | more"} {
		var out bytes.Buffer
		if code := run(strings.NewReader(""), &out, allowList(t, line+"\n"), "", ""); code != exitUsage {
			t.Errorf("%q: exit code %d, want 2 (%s)", line, code, out.String())
		}
	}
}
