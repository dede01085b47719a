package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/sandbox"
)

// listOnlySession is a session that can say a file's size (ListDir) but
// has no bounded read: read_file must refuse a large file from its size,
// without ever reading it whole.
type listOnlySession struct {
	sandbox.Session
	t *testing.T
}

func (s listOnlySession) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if strings.Contains(p, "big") {
		s.t.Errorf("read_file read %s whole", p)
	}
	return s.Session.ReadFile(ctx, p)
}

// A file over read_file's limit is refused by its size, before its bytes
// enter the harness, with a message that says the size and how to read
// part of it; the limit holds whether the backend reads bounded or can
// only say sizes.
func TestReadFileRefusesAFileOverItsLimitBeforeReadingIt(t *testing.T) {
	c := newClient(t)
	raw, err := c.Client.Create(context.Background(), sandbox.Spec{Workspace: t.TempDir(), AllowWeaker: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close(context.Background()) })
	ws := raw.State().Workspace
	// Sparse: 100 MiB that costs no disk, and would cost the harness
	// 100 MiB of memory if read.
	f, err := os.Create(filepath.Join(ws, "big.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Symlink("big.log", filepath.Join(ws, "big.link")); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw.(sandbox.LimitedReader); !ok {
		t.Fatal("the local backend's session does not read bounded")
	}
	for _, tt := range []struct {
		name string
		sess sandbox.Session
		path string
	}{
		{"a backend that reads bounded", raw, "big.log"},
		{"a backend that only says sizes", listOnlySession{raw, t}, "big.log"},
		{"a link to the file, on a backend that only says sizes", listOnlySession{raw, t}, "big.link"},
		{"the tools' own directory", workdirSession{Session: listOnlySession{raw, t}, dir: sandbox.DefaultWorkdir}, "big.log"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			read := (&Filesystem{}).Tools(tt.sess)[1]
			_, err := read.Call(context.Background(), []byte(fmt.Sprintf(`{"path": %q}`, tt.path)))
			if err == nil {
				t.Fatal("a 100 MiB file was read")
			}
			for _, want := range []string{"104857600 bytes (100.0 MiB)", "limit of 8388608 bytes", "exec_command", "sed -n"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// read_file's answer stays within the tool-output cap: it ends at a whole
// line and says where to read on, and a single line over the cap is cut
// with a note, instead of the middle of the answer being lost.
func TestReadFileAnswersWithinTheToolOutputCap(t *testing.T) {
	sess := liveSession(t)
	ws := sess.State().Workspace
	var b strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&b, "line %04d %s\n", i, strings.Repeat("x", 90))
	}
	if err := os.WriteFile(filepath.Join(ws, "many.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "one.json"), []byte(strings.Repeat("é", 1<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	read := (&Filesystem{}).Tools(sess)[1]
	call := func(args string) string {
		t.Helper()
		out, err := read.Call(context.Background(), []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > DefaultToolOutputBytes {
			t.Fatalf("answer of %d bytes, over the %d-byte cap", len(out), DefaultToolOutputBytes)
		}
		return out
	}

	out := call(`{"path": "many.txt"}`)
	head, body, _ := strings.Cut(out, "\n")
	var last, next int
	if _, err := fmt.Sscanf(head, "[lines 1-%d of 3000; the answer stops at", &last); err != nil {
		t.Fatalf("header %q: %v", head, err)
	}
	if !strings.Contains(head, fmt.Sprintf("read on with offset %d]", last+1)) {
		t.Errorf("header %q does not say where to read on", head)
	}
	if !strings.HasSuffix(body, "\n") || !strings.HasPrefix(body, "line 0001 ") || strings.Count(body, "\n") != last {
		t.Errorf("the answer is not lines 1-%d whole: ends %q", last, body[len(body)-20:])
	}
	next = last + 1
	out = call(fmt.Sprintf(`{"path": "many.txt", "offset": %d}`, next))
	if _, body, _ := strings.Cut(out, "\n"); !strings.HasPrefix(body, fmt.Sprintf("line %04d ", next)) {
		t.Errorf("reading on does not continue at line %d: %.40q", next, body)
	}

	out = call(`{"path": "one.json"}`)
	head, body, _ = strings.Cut(out, "\n")
	if !strings.HasPrefix(head, "[line 1 of 1 is 2097152 bytes; its first ") || !strings.Contains(head, "exec_command") || !strings.HasPrefix(body, "éé") {
		t.Errorf("a line over the cap: header %q, body %.20q", head, body)
	}
}

// A read limit below one byte is refused, not passed on to a backend that
// reads 0 as no limit.
func TestReadFileLimitRefusesALimitBelowOneByte(t *testing.T) {
	c := newClient(t)
	s, err := c.Client.Create(context.Background(), sandbox.Spec{Workspace: t.TempDir(), AllowWeaker: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	if err := os.WriteFile(filepath.Join(s.State().Workspace, "f.txt"), []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, max := range []int64{0, -1} {
		if data, err := sandbox.ReadFileLimit(context.Background(), s, "f.txt", max); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("ReadFileLimit(max %d) = %q, %v; want it refused as invalid", max, data, err)
		}
	}
}
