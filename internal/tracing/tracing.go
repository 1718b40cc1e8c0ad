// Package tracing builds the gateway's OpenTelemetry TracerProvider from
// the standard OTEL_* environment variables. It owns nothing but the
// provider: the spans themselves are made by internal/front
// (tracing.go), which sees only a trace.Tracer, and the gateway
// (internal/gateway/tracing.go) calls New at start and Shutdown last in
// its shutdown order, after every request has been answered.
//
// Tracing is off unless an OTLP endpoint is configured
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and
// OTEL_TRACES_EXPORTER ("otlp" by default; "none" turns it off) and
// OTEL_SDK_DISABLED ("true" turns it off) allow it. Spans are sent with
// OTLP over HTTP (protobuf) by a batch span processor; the exporter reads
// its own variables (endpoint, headers, timeout, compression, TLS files).
//
// A Provider is safe for concurrent use; Shutdown is called once.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME (or a
// service.name in OTEL_RESOURCE_ATTRIBUTES) does not say otherwise.
const DefaultServiceName = "mcpgate"

// ShutdownTimeout bounds Shutdown when its context has no earlier
// deadline: the spans still queued are sent for this long at most, so an
// unreachable collector never holds up the gateway's exit by more.
const ShutdownTimeout = 5 * time.Second

// InstrumentationName is the name of the gateway's Tracer (the
// instrumentation scope of its spans).
const InstrumentationName = "github.com/mcpgate/mcpgate"

// ErrUnsupportedExporter is returned by New when OTEL_TRACES_EXPORTER
// names an exporter other than "otlp" or "none", or the OTLP protocol is
// not "http/protobuf".
var ErrUnsupportedExporter = errors.New("tracing: unsupported OTEL_TRACES_EXPORTER")

// Options configures New. Zero values take the documented defaults.
type Options struct {
	// ServiceVersion is the resource's service.version. Default "" (none).
	ServiceVersion string
	// Exporter, if set, receives the spans instead of the OTLP exporter,
	// each as it ends (a synchronous processor), and tracing is on
	// whatever the environment says. For tests. Default nil.
	Exporter sdktrace.SpanExporter
	// Getenv reads the environment. Default os.Getenv.
	Getenv func(string) string
}

// Provider is a started TracerProvider.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Enabled reports whether the environment read by getenv (nil:
// os.Getenv) turns tracing on; see the package comment.
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// New returns a started Provider, or nil and no error when tracing is off.
// It does not contact the collector: an unreachable one costs the spans
// it would have received (the exporter logs through otel.Handle), never a
// request.
func New(ctx context.Context, o Options) (*Provider, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var opt sdktrace.TracerProviderOption
	if o.Exporter != nil {
		opt = sdktrace.WithSyncer(o.Exporter)
	} else {
		if !Enabled(getenv) {
			return nil, nil
		}
		// OTEL_TRACES_EXPORTER is a list; only otlp is built in.
		for name := range strings.SplitSeq(getenv("OTEL_TRACES_EXPORTER"), ",") {
			if name = strings.TrimSpace(name); name != "" && name != "otlp" {
				return nil, fmt.Errorf("%w %q (only \"otlp\" and \"none\")", ErrUnsupportedExporter, name)
			}
		}
		// Spans in protobuf over HTTP to a gRPC port would be lost
		// without a word: refuse what is not built in.
		proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if proto == "" {
			proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if proto != "" && proto != "http/protobuf" {
			return nil, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL %q (only \"http/protobuf\")", ErrUnsupportedExporter, proto)
		}
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
		// The batch processor reads OTEL_BSP_* itself; its queue is bounded
		// (2048 spans by default) and drops spans when full, never blocks.
		opt = sdktrace.WithBatcher(exp)
	}
	res, err := newResource(ctx, o.ServiceVersion)
	if err != nil {
		return nil, err
	}
	return &Provider{tp: sdktrace.NewTracerProvider(opt, sdktrace.WithResource(res))}, nil
}

// newResource is the gateway's resource: service.name "mcpgate" and
// service.version, under what OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES say (they win).
func newResource(ctx context.Context, version string) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{attribute.String("service.name", DefaultServiceName)}
	if version != "" {
		attrs = append(attrs, attribute.String("service.version", version))
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attrs...),
		resource.WithFromEnv(), // later detectors win
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// A partly bad OTEL_RESOURCE_ATTRIBUTES still gives the rest.
	return res, nil
}

// Tracer returns the gateway's Tracer.
func (p *Provider) Tracer() trace.Tracer {
	return p.tp.Tracer(InstrumentationName)
}

// Shutdown sends the spans still queued and stops the provider, within
// ctx's deadline or ShutdownTimeout, whichever comes first; spans not sent
// by then are dropped.
func (p *Provider) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ShutdownTimeout)
	defer cancel()
	return p.tp.Shutdown(ctx)
}
