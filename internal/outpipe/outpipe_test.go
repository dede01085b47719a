package outpipe

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// written runs Write(b) and reports, on the channel, when it returned.
func written(p *Pipe, b []byte) chan struct{} {
	done := make(chan struct{})
	go func() { _, _ = p.Write(b); close(done) }()
	return done
}

func returns(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

func TestAWriterWaitsPastTheWindowUnlessDrainedAndNothingIsLost(t *testing.T) {
	p := New(4)
	_, _ = p.Write([]byte("abcd"))
	w := written(p, []byte("ef"))
	if returns(w) {
		t.Fatal("a write past the window did not wait for the reader")
	}
	p.Drain(true)
	if !returns(w) {
		t.Fatal("a drain did not release the waiting write")
	}
	if !returns(written(p, []byte("ghij"))) {
		t.Fatal("a write while draining waited")
	}
	p.Drain(false)
	k := written(p, []byte("k"))
	if returns(k) {
		t.Fatal("after the drain a write past the window did not wait")
	}
	b := make([]byte, 100)
	n, _ := p.Read(b)
	if got := string(b[:n]); got != "abcdefghij" {
		t.Fatalf("read %q", got)
	}
	// The writer ends the stream after its last write returned, as a
	// producer does (End does not wait for writes still under way).
	if !returns(k) {
		t.Fatal("a read that emptied the window did not release the waiting write")
	}
	p.End()
	rest, err := io.ReadAll(p)
	if err != nil || string(rest) != "k" {
		t.Fatalf("after the end: %q, %v; want the last write, then EOF", rest, err)
	}
}

func TestClosingTheReadersEndReleasesAndDropsWrites(t *testing.T) {
	p := New(1)
	_, _ = p.Write([]byte("a"))
	w := written(p, []byte("b"))
	p.Close()
	if !returns(w) {
		t.Fatal("Close did not release the waiting write")
	}
	if _, err := p.Read(make([]byte, 1)); err != io.ErrClosedPipe {
		t.Fatalf("read after close: %v", err)
	}
	if n, err := p.Write(bytes.Repeat([]byte("x"), 10)); n != 10 || err != nil {
		t.Fatalf("write after close: %d, %v; want it dropped quietly", n, err)
	}
}
