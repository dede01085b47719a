package kube

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// What client-go cannot return (runtime.HandleError's "Unhandled Error",
// klog's own error lines) reaches the Client's logger at debug level, and
// never stderr.
func TestClientGoErrorsGoToTheLoggerAtDebugNotStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = stderr }()

	var debug, quiet bytes.Buffer
	routeKlog(slog.New(slog.NewTextHandler(&quiet, &slog.HandlerOptions{Level: slog.LevelInfo})))
	utilruntime.HandleError(errors.New("error copying stdout: use of closed network connection"))
	routeKlog(slog.New(slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug})))
	utilruntime.HandleError(errors.New("error copying stdout: broken pipe"))
	klog.Errorf("Websocket Ping failed: %v", "timeout")
	klog.Flush()

	os.Stderr = stderr
	w.Close()
	printed, _ := io.ReadAll(r)
	if len(printed) > 0 {
		t.Errorf("client-go wrote to stderr:\n%s", printed)
	}
	if quiet.Len() > 0 {
		t.Errorf("a logger without debug got client-go's lines:\n%s", quiet.String())
	}
	lines := strings.Split(strings.TrimSpace(debug.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("the logger got %d lines, want 2:\n%s", len(lines), debug.String())
	}
	for i, want := range []string{"broken pipe", "Websocket Ping failed: timeout"} {
		if l := lines[i]; !strings.Contains(l, "level=DEBUG") || !strings.Contains(l, want) || !strings.Contains(l, "from=client-go") {
			t.Errorf("line %d is not %q at debug from client-go: %s", i, want, l)
		}
	}
}
