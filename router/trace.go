package router

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Traces: with Caddy's tracing directive on the site, the request's
// context carries Caddy's server span, and the router's spans are its
// children, made by the same tracer provider: the admission (the gate's
// wait), each attempt of a choice, and each call to an engine (prep_recv,
// remote_send, start_generate, or the whole completion), whose span also
// records the stream (first token, tokens, finish reason). The W3C
// traceparent goes to the engines with every call. Without tracing the
// context's span does not record, and nothing is made: no allocation on
// the request's path.

// tracerName names the router's instrumentation scope.
const tracerName = "github.com/caddy-mlc/caddy-mlc/router"

// idle is the span of a request that is not traced.
var idle = noop.Span{}

// startSpan starts a child span of ctx's span named name, when ctx's span
// records; otherwise it returns ctx and a span that records nothing.
func startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, idle
	}
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, name, trace.WithAttributes(attrs...))
}

// endSpan ends span with err as its status (nil: ok).
func endSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceContext is W3C's trace context propagation: what the engines get.
var traceContext = propagation.TraceContext{}

// injectTrace puts ctx's traceparent (and tracestate) in an engine call's
// headers, when ctx is traced.
func injectTrace(ctx context.Context, h propagation.HeaderCarrier) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		traceContext.Inject(ctx, h)
	}
}

// callName is the span name of an engine call: the microserving step
// (prep_recv, remote_send, start_generate, release) or the OpenAI path
// (v1/completions, v1/embeddings), unless ctx names the call otherwise
// (withCallName).
func callName(ctx context.Context, op string) string {
	if name, ok := ctx.Value(callNameKey{}).(string); ok {
		return name
	}
	if step, ok := strings.CutPrefix(op, "microserving/"); ok {
		return step
	}
	return op
}

type callNameKey struct{}

// withCallName names the engine call made with ctx in its span: a
// microserving step made through another path (MLC's remote_send, made as
// the completion its entrypoint makes of it).
func withCallName(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, callNameKey{}, name)
}
