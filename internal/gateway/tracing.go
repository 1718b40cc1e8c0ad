package gateway

import (
	"context"
	"net/http"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/internal/front"
	"github.com/mcpgate/mcpgate/internal/tracing"
)

// This file wires tracing (internal/tracing, configured by the OTEL_*
// environment variables) into the gateway: the provider is started with
// the handler, the HTTP front reads each request's traceparent header, and
// the provider is shut down last, after every request was answered and
// every server stopped, so the spans of the requests Close answered are
// sent too (within tracing.ShutdownTimeout).

// testSpanExporter, when set, receives the spans of the gateways started
// after, each as it ends, whatever the environment says. Tests only.
var testSpanExporter sdktrace.SpanExporter

// startTracing starts the tracer provider the environment asks for and
// returns its Tracer; nil when tracing is off or cannot start (logged:
// the gateway serves without it).
func (g *Gateway) startTracing() trace.Tracer {
	p, err := tracing.New(context.Background(), tracing.Options{ServiceVersion: Version, Exporter: testSpanExporter})
	if err != nil {
		g.log.Warn("tracing is off", "err", err)
		return nil
	}
	if p == nil {
		return nil
	}
	g.tracing = p
	g.log.Info("tracing on", "exporter", "otlp/http")
	return p.Tracer()
}

// traceHTTP returns h, with the requests' trace context headers read
// when tracing is on.
func (g *Gateway) traceHTTP(h http.Handler) http.Handler {
	if g.tracing == nil {
		return h
	}
	return front.TraceContext(h)
}

// stopTracing sends the spans still queued and stops the provider,
// bounded by tracing.ShutdownTimeout.
func (g *Gateway) stopTracing() {
	if g.tracing == nil {
		return
	}
	if err := g.tracing.Shutdown(context.Background()); err != nil {
		g.log.Warn("tracing: spans not sent at shutdown", "err", err)
	}
}
