package docker

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

func TestParseMarker(t *testing.T) {
	cases := []struct {
		name    string
		line    string
		pid     int
		started string
		ok      bool
	}{
		{"the wrapper's line is read", "t1 42 123456", 42, "123456", true},
		{"a terminal's carriage return is ignored", "t1 42 123456\r", 42, "123456", true},
		{"spaces around the fields are ignored", "  t1  42\t123456 ", 42, "123456", true},
		{"another tag is refused", "t2 42 123456", 0, "", false},
		{"a tag with the right prefix is refused", "t1x 42 123456", 0, "", false},
		{"an empty line is refused", "", 0, "", false},
		{"a tag alone is refused", "t1", 0, "", false},
		{"a missing starttime is refused", "t1 42", 0, "", false},
		{"an extra field is refused", "t1 42 123456 7", 0, "", false},
		{"a pid that is no number is refused", "t1 x 123456", 0, "", false},
		{"a pid past int is refused", "t1 99999999999999999999 123456", 0, "", false},
		{"init as the pid is refused", "t1 1 123456", 0, "", false},
		{"pid zero is refused", "t1 0 123456", 0, "", false},
		{"a negative pid is refused", "t1 -5 123456", 0, "", false},
		{"a starttime that is no number is refused", "t1 42 soon", 0, "", false},
		{"a signed starttime is refused", "t1 42 +12", 0, "", false},
		{"a negative starttime is refused", "t1 42 -12", 0, "", false},
		{"a starttime past uint64 is refused", "t1 42 99999999999999999999999", 0, "", false},
		{"a line with a NUL is refused", "t1 42\x00 123456", 0, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pid, started, ok := parseMarker([]byte(tc.line), "t1")
			if pid != tc.pid || started != tc.started || ok != tc.ok {
				t.Fatalf("parseMarker(%q) = %d, %q, %v; want %d, %q, %v", tc.line, pid, started, ok, tc.pid, tc.started, tc.ok)
			}
		})
	}
	if _, _, ok := parseMarker(nil, "t1"); ok {
		t.Fatal("parseMarker(nil) accepted")
	}
}

func TestFirstLine(t *testing.T) {
	long := strings.Repeat("x", maxMarker+1)
	cases := []struct {
		name   string
		writes []string
		isOurs bool     // what take answers
		out    string   // what reaches dst
		taken  []string // the lines take saw ("<nil>" for nil)
		held   bool     // flush reports the line never came
	}{
		{"the wrapper's line is dropped, the rest passes", []string{"t 5 6\nhello"}, true, "hello", []string{"t 5 6"}, false},
		{"a line split over writes is put together", []string{"t 5", " 6", "\nhe", "llo"}, true, "hello", []string{"t 5 6"}, false},
		{"a line that is not the wrapper's passes whole", []string{"oops\nmore"}, false, "oops\nmore", []string{"oops"}, false},
		{"an empty first line is offered and may be dropped", []string{"\nrest"}, true, "rest", []string{""}, false},
		{"past maxMarker bytes with no newline take gets nil and all passes", []string{long, "tail"}, true, long + "tail", []string{"<nil>"}, false},
		{"maxMarker bytes and no newline are still held", []string{long[:maxMarker]}, true, long[:maxMarker], nil, true},
		{"a long first line with its newline is offered whole", []string{long + "\nok"}, false, long + "\nok", []string{long}, false},
		{"a stream that ends before a newline passes what it had", []string{"t 5"}, true, "t 5", nil, true},
		{"an empty stream passes nothing", nil, true, "", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var dst bytes.Buffer
			var taken []string
			f := &firstLine{dst: &dst, take: func(b []byte) bool {
				if b == nil {
					taken = append(taken, "<nil>")
				} else {
					taken = append(taken, string(b))
				}
				return tc.isOurs
			}}
			for _, w := range tc.writes {
				n, err := f.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", len(w), n, err)
				}
			}
			if held := f.flush(); held != tc.held {
				t.Fatalf("flush = %v, want %v", held, tc.held)
			}
			if dst.String() != tc.out {
				t.Errorf("dst got %q, want %q", dst.String(), tc.out)
			}
			if strings.Join(taken, "|") != strings.Join(tc.taken, "|") || len(taken) != len(tc.taken) {
				t.Errorf("take saw %q, want %q", taken, tc.taken)
			}
		})
	}
	t.Run("an error of dst is returned", func(t *testing.T) {
		boom := errors.New("boom")
		f := &firstLine{dst: failWriter{boom}, take: func([]byte) bool { return true }}
		if _, err := f.Write([]byte("t 5 6\nrest")); !errors.Is(err, boom) {
			t.Fatalf("Write = %v, want %v", err, boom)
		}
	})
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

// stdinPair is a stdinWriter over one end of a unix socket pair, as the
// attach connection, and the other end, as the command's side.
func stdinPair(t *testing.T, tty bool) (*stdinWriter, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "stdin")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close() })
	}
	return newStdinWriter(&client.HijackedResponse{Conn: conns[0]}, tty), conns[1]
}

// within fails the test unless f returns within d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s still blocks after %s", what, d)
	}
}

// readAll reads the command's side until EOF, failing after d.
func readAll(t *testing.T, c net.Conn, d time.Duration) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read the command's input: %v (after %d bytes)", err, len(b))
	}
	return b
}

func TestStdinWriter(t *testing.T) {
	t.Run("input goes after the go-ahead, then EOF on Close", func(t *testing.T) {
		w, peer := stdinPair(t, false)
		if err := w.settle(true, true); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("abc")); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, peer, 5*time.Second); string(got) != "go\nabc" {
			t.Fatalf("the command read %q, want %q", got, "go\nabc")
		}
	})
	t.Run("a Close before the start is settled closes after the go-ahead", func(t *testing.T) {
		w, peer := stdinPair(t, false)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.settle(true, true); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, peer, 5*time.Second); string(got) != "go\n" {
			t.Fatalf("the command read %q, want %q", got, "go\n")
		}
	})
	t.Run("a refused start takes no input and closes it", func(t *testing.T) {
		w, peer := stdinPair(t, false)
		if err := w.settle(false, false); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("abc")); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("Write = %v, want io.ErrClosedPipe", err)
		}
		if got := readAll(t, peer, 5*time.Second); len(got) != 0 {
			t.Fatalf("the command read %q, want nothing", got)
		}
	})
	t.Run("a terminal's input is closed by the EOF character", func(t *testing.T) {
		w, peer := stdinPair(t, true)
		if err := w.settle(true, false); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(peer, b); err != nil || b[0] != 4 {
			t.Fatalf("the command read %q, %v; want ^D", b, err)
		}
	})
	t.Run("Close ends a Write that waits for the start to settle", func(t *testing.T) {
		w, _ := stdinPair(t, false)
		werr := make(chan error, 1)
		go func() {
			_, err := w.Write([]byte("abc"))
			werr <- err
		}()
		time.Sleep(100 * time.Millisecond)
		within(t, 2*time.Second, "Close", func() { _ = w.Close() })
		within(t, 2*time.Second, "the Write", func() {
			if err := <-werr; !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("Write = %v, want io.ErrClosedPipe", err)
			}
		})
	})
	for _, tty := range []bool{false, true} {
		name := "Close does not wait for a Write the command never reads"
		if tty {
			name += ", with a terminal"
		}
		t.Run(name, func(t *testing.T) {
			w, peer := stdinPair(t, tty)
			if err := w.settle(true, false); err != nil {
				t.Fatal(err)
			}
			big := make([]byte, 16<<20) // far past the socket's buffer
			werr := make(chan error, 1)
			go func() {
				_, err := w.Write(big)
				werr <- err
			}()
			select {
			case err := <-werr:
				t.Fatalf("a %d byte Write nobody reads returned: %v", len(big), err)
			case <-time.After(200 * time.Millisecond):
			}
			within(t, 2*time.Second, "Close", func() { _ = w.Close() })
			within(t, eofWait+2*time.Second, "the Write", func() {
				if err := <-werr; !errors.Is(err, io.ErrClosedPipe) {
					t.Errorf("Write = %v, want io.ErrClosedPipe", err)
				}
			})
			if _, err := w.Write([]byte("more")); !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("Write after Close = %v, want io.ErrClosedPipe", err)
			}
			if !tty {
				// What got through is followed by EOF.
				if got := readAll(t, peer, 5*time.Second); len(got) == 0 || len(got) >= len(big) {
					t.Fatalf("the command read %d bytes; want some, then EOF", len(got))
				}
			}
		})
	}
}
