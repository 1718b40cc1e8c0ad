package tracing

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, false}, // no endpoint: off, not localhost
	} {
		if got := Enabled(env(tc.env)); got != tc.want {
			t.Errorf("Enabled(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

func TestNewOffIsNil(t *testing.T) {
	p, err := New(context.Background(), Options{Getenv: env(nil)})
	if p != nil || err != nil {
		t.Fatalf("New without an endpoint = %v, %v; want nil, nil", p, err)
	}
}

func TestNewUnsupportedExporter(t *testing.T) {
	_, err := New(context.Background(), Options{Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "zipkin",
	})})
	if !errors.Is(err, ErrUnsupportedExporter) {
		t.Fatalf("err %v, want ErrUnsupportedExporter", err)
	}
	_, err = New(context.Background(), Options{Getenv: env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
	})})
	if !errors.Is(err, ErrUnsupportedExporter) {
		t.Fatalf("grpc: err %v, want ErrUnsupportedExporter", err)
	}
}

func TestResource(t *testing.T) {
	for _, tc := range []struct{ envName, want string }{{"", DefaultServiceName}, {"edge-gw", "edge-gw"}} {
		t.Setenv("OTEL_SERVICE_NAME", tc.envName)
		exp := tracetest.NewInMemoryExporter()
		p, err := New(context.Background(), Options{ServiceVersion: "v1.2.3", Exporter: exp})
		if err != nil {
			t.Fatal(err)
		}
		_, span := p.Tracer().Start(context.Background(), "x")
		span.End()
		spans := exp.GetSpans()
		if len(spans) != 1 {
			t.Fatalf("%d spans", len(spans))
		}
		got := map[string]string{}
		for _, kv := range spans[0].Resource.Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
		}
		if got["service.name"] != tc.want || got["service.version"] != "v1.2.3" {
			t.Errorf("OTEL_SERVICE_NAME=%q: resource %v", tc.envName, got)
		}
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A collector that never answers holds Shutdown no longer than its
// context allows.
func TestShutdownBoundedByUnreachableCollector(t *testing.T) {
	release := make(chan struct{})
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer collector.Close()
	defer close(release) // before Close: the handlers return
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300") // ms: the export goroutine ends soon after
	p, err := New(context.Background(), Options{})
	if err != nil || p == nil {
		t.Fatalf("New = %v, %v", p, err)
	}
	_, span := p.Tracer().Start(context.Background(), "lost")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = p.Shutdown(ctx)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Shutdown took %v with a 200ms deadline", took)
	}
	if err == nil {
		t.Errorf("Shutdown reported the spans sent to a collector that never answered")
	}
}
