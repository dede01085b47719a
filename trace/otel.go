package trace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// OTLPConfig says where to export spans over OTLP/HTTP (protobuf).
type OTLPConfig struct {
	// Endpoint is the collector's base URL ("http://localhost:4318"); the
	// traces path /v1/traces is appended when the URL has no path.
	Endpoint string
	// Headers are sent with every export (an API key, for instance).
	Headers map[string]string
	// ServiceName is the resource's service.name; default "agentbox".
	ServiceName string
	// Timeout bounds each export; default 10s.
	Timeout time.Duration
}

// OTLPFromEnv reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL); ok is false when neither is set.
func OTLPFromEnv() (cfg OTLPConfig, ok bool) {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		return OTLPConfig{Endpoint: v}, true
	}
	if v := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		return OTLPConfig{Endpoint: strings.TrimSuffix(v, "/") + "/v1/traces"}, true
	}
	return OTLPConfig{}, false
}

// ExportOTLP makes w also export its events as spans: a run span, a
// child span per model turn, and a grandchild per tool call, all in the
// trace w.TraceID(). Spans are sent in batches and flushed by Close. Call
// it before the first Emit.
func (w *Writer) ExportOTLP(ctx context.Context, cfg OTLPConfig) error {
	endpoint := cfg.Endpoint
	if endpoint == "" {
		return fmt.Errorf("trace: OTLP export: no endpoint")
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return fmt.Errorf("trace: OTLP endpoint %q is not a URL", cfg.Endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	endpoint = u.String()
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithTimeout(timeout)}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return fmt.Errorf("trace: OTLP exporter for %s: %w", endpoint, err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "agentbox"
	}
	var tid oteltrace.TraceID
	if _, err := hex.Decode(tid[:], []byte(w.traceID)); err != nil {
		return fmt.Errorf("trace: trace id %q: %w", w.traceID, err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithIDGenerator(fixedTrace{id: tid}),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(name))),
	)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spans = &spanExporter{
		provider: tp,
		tracer:   tp.Tracer("github.com/agentbox/agentbox/trace"),
		tools:    map[string]oteltrace.Span{},
		endpoint: endpoint,
	}
	return nil
}

// fixedTrace puts every root span in one trace id, so the OTLP trace and
// the JSONL trace share their id.
type fixedTrace struct{ id oteltrace.TraceID }

func (f fixedTrace) NewIDs(ctx context.Context) (oteltrace.TraceID, oteltrace.SpanID) {
	return f.id, f.NewSpanID(ctx, f.id)
}

func (fixedTrace) NewSpanID(context.Context, oteltrace.TraceID) oteltrace.SpanID {
	var s oteltrace.SpanID
	for s == (oteltrace.SpanID{}) {
		_, _ = rand.Read(s[:])
	}
	return s
}

// spanExporter turns the event stream into spans. It is only used under
// the Writer's lock.
type spanExporter struct {
	provider *sdktrace.TracerProvider
	tracer   oteltrace.Tracer
	endpoint string
	runCtx   context.Context
	run      oteltrace.Span
	turnCtx  context.Context
	turn     oteltrace.Span
	tools    map[string]oteltrace.Span
}

func (s *spanExporter) observe(e Event) {
	at := oteltrace.WithTimestamp(e.Time)
	switch e.Type {
	case RunStart:
		s.runCtx, s.run = s.tracer.Start(context.Background(), "agent.run", at,
			oteltrace.WithAttributes(
				attribute.String("agentbox.run_id", e.RunID),
				attribute.String("agentbox.agent", e.Agent),
				attribute.String("agentbox.model", e.Model),
				attribute.String("agentbox.session", e.Session),
			))
	case ModelRequest:
		s.endTurn(e.Time)
		if s.run == nil {
			return
		}
		s.turnCtx, s.turn = s.tracer.Start(s.runCtx, fmt.Sprintf("turn %d", e.Turn), at,
			oteltrace.WithAttributes(
				attribute.Int("agentbox.turn", e.Turn),
				attribute.Int("agentbox.items", e.Items),
				attribute.StringSlice("agentbox.tools", e.Tools),
			))
	case ModelResponse:
		if s.turn != nil {
			s.turn.SetAttributes(attribute.StringSlice("agentbox.calls", e.Calls))
			if e.Usage != nil {
				s.turn.SetAttributes(
					attribute.Int64("gen_ai.usage.input_tokens", e.Usage.InputTokens),
					attribute.Int64("gen_ai.usage.output_tokens", e.Usage.OutputTokens),
				)
			}
		}
	case ToolCall:
		parent := s.turnCtx
		if parent == nil {
			parent = s.runCtx
		}
		if parent == nil {
			return
		}
		_, sp := s.tracer.Start(parent, "tool "+e.Tool, at,
			oteltrace.WithAttributes(
				attribute.String("agentbox.tool", e.Tool),
				attribute.String("agentbox.call_id", e.CallID),
				attribute.String("agentbox.arguments", clip(e.Arguments, 1024)),
			))
		s.tools[e.CallID] = sp
	case SandboxExec, Approval:
		if sp := s.tools[e.CallID]; sp != nil {
			attrs := []attribute.KeyValue{attribute.String("agentbox.cmd", clip(e.Cmd, 1024))}
			if e.ExitCode != nil {
				attrs = append(attrs, attribute.Int("agentbox.exit_code", *e.ExitCode))
			}
			if e.Approved != nil {
				attrs = append(attrs, attribute.Bool("agentbox.approved", *e.Approved))
			}
			sp.AddEvent(string(e.Type), oteltrace.WithTimestamp(e.Time), oteltrace.WithAttributes(attrs...))
		}
	case ToolResult:
		if sp := s.tools[e.CallID]; sp != nil {
			sp.SetAttributes(attribute.Int("agentbox.output_bytes", e.Bytes), attribute.Bool("agentbox.truncated", e.Truncated))
			if e.Err != "" {
				sp.SetStatus(codes.Error, e.Err)
			}
			sp.End(oteltrace.WithTimestamp(e.Time))
			delete(s.tools, e.CallID)
		}
	case Error:
		if s.run != nil {
			s.run.SetStatus(codes.Error, e.Err)
			s.run.AddEvent("error", oteltrace.WithTimestamp(e.Time), oteltrace.WithAttributes(attribute.String("error", e.Err)))
		}
	case RunEnd:
		s.endAll(e.Time)
	}
}

func (s *spanExporter) endTurn(t time.Time) {
	for id, sp := range s.tools {
		sp.End(oteltrace.WithTimestamp(t))
		delete(s.tools, id)
	}
	if s.turn != nil {
		s.turn.End(oteltrace.WithTimestamp(t))
		s.turn, s.turnCtx = nil, nil
	}
}

func (s *spanExporter) endAll(t time.Time) {
	s.endTurn(t)
	if s.run != nil {
		s.run.End(oteltrace.WithTimestamp(t))
		s.run, s.runCtx = nil, nil
	}
}

// shutdown ends what a crashed run left open and flushes every span.
func (s *spanExporter) shutdown() error {
	s.endAll(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("trace: flush spans to %s: %w", s.endpoint, err)
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
