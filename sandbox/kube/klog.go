package kube

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// client-go reports what it cannot return through process-wide loggers:
// apimachinery's runtime.HandleError ("Unhandled Error", e.g. a stream's
// copy that fails as an exec or port-forward closes) and klog's own
// Errorf calls (a failed websocket ping), which klog writes to stderr.
// Each is noise to a user: what matters of the stream ends in the error
// that Stream returns, and is reported from there. routeKlog sends all
// of klog, the runtime's error handler included (it logs through klog),
// to a Client's logger at debug level.
//
// klog is one per process and its lines name no client, so they go to
// the Logger of the latest Client made (the only one, in the CLI); before
// the first, klog keeps its default. The runtime's error handlers,
// including its rate limit, are left as they are.

var (
	klogOnce sync.Once
	klogSink atomic.Pointer[slog.Logger]
)

// routeKlog makes log the destination of klog's lines, at debug level.
func routeKlog(log *slog.Logger) {
	klogSink.Store(log)
	klogOnce.Do(func() { klog.SetSlogLogger(slog.New(debugHandler{})) })
}

// debugHandler hands every record, at debug level, to the logger of
// klogSink at the time of the record.
type debugHandler struct {
	// with are the WithAttrs and WithGroup calls made on this handler, in
	// order, replayed on the sink's handler.
	with []func(slog.Handler) slog.Handler
}

func (h debugHandler) sink() slog.Handler {
	l := klogSink.Load()
	if l == nil {
		return slog.DiscardHandler
	}
	s := l.Handler()
	for _, w := range h.with {
		s = w(s)
	}
	return s
}

// Enabled asks the sink about debug, whatever klog's level.
func (h debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.sink().Enabled(ctx, slog.LevelDebug)
}

// Handle hands r to the sink at debug level, saying where it came from.
func (h debugHandler) Handle(ctx context.Context, r slog.Record) error {
	s := h.sink()
	if !s.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	d := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
	d.AddAttrs(slog.String("from", "client-go"), slog.String("klog_level", r.Level.String()))
	r.Attrs(func(a slog.Attr) bool {
		d.AddAttrs(a)
		return true
	})
	return s.Handle(ctx, d)
}

func (h debugHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.and(func(s slog.Handler) slog.Handler { return s.WithAttrs(attrs) })
}

func (h debugHandler) WithGroup(name string) slog.Handler {
	return h.and(func(s slog.Handler) slog.Handler { return s.WithGroup(name) })
}

func (h debugHandler) and(w func(slog.Handler) slog.Handler) slog.Handler {
	return debugHandler{with: append(h.with[:len(h.with):len(h.with)], w)}
}
