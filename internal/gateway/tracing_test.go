package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Trace context a client sends: its trace, and its span (the parent of the
// gateway's).
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	clientTP      = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// withSpans makes the gateways the test starts trace into an in-memory
// exporter, each span exported as it ends (before its reply is sent).
func withSpans(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	testSpanExporter = exp
	t.Cleanup(func() { testSpanExporter = nil })
	return exp
}

// spanNamed returns the only span named name.
func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1 (all: %v)", len(found), name, spanNames(exp))
	}
	return found[0]
}

func spanNames(exp *tracetest.InMemoryExporter) []string {
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	return names
}

// attr returns span's attribute key ("" and false without).
func attr(s tracetest.SpanStub, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttr(t *testing.T, s tracetest.SpanStub, key, want string) {
	t.Helper()
	v, ok := attr(s, key)
	if !ok || v.Emit() != want {
		t.Errorf("span %q: %s = %q (present %v), want %q", s.Name, key, v.Emit(), ok, want)
	}
}

// serverMeta calls the fake's unlisted "meta" tool with _meta meta and
// returns the params._meta the server received.
func serverMeta(t *testing.T, c *mcpClient, id, meta string) string {
	t.Helper()
	return toolText(t, c.post(t, callBody(id, "meta", map[string]any{}, meta)).final(t))
}

// A client's trace continues through the gateway into the server: the
// gateway's span is a child of the client's (from _meta), and the server
// gets the gateway's span as its parent, the client's other _meta intact.
func TestTraceContinuesThroughGateway(t *testing.T) {
	exp := withSpans(t)
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)

	got := serverMeta(t, c, "7", `{"traceparent":"`+clientTP+`","tracestate":"k=v","x":{"a":[1,2]}}`)
	var meta struct {
		Traceparent string          `json:"traceparent"`
		Tracestate  string          `json:"tracestate"`
		X           json.RawMessage `json:"x"`
	}
	if err := json.Unmarshal([]byte(got), &meta); err != nil {
		t.Fatalf("server's _meta %q: %v", got, err)
	}

	s := spanNamed(t, exp, "tools/call meta")
	if s.SpanKind != trace.SpanKindServer {
		t.Errorf("span kind %v, want server", s.SpanKind)
	}
	if s.SpanContext.TraceID().String() != clientTraceID || s.Parent.SpanID().String() != clientSpanID || !s.Parent.IsRemote() {
		t.Errorf("span trace %s parent %s (remote %v), want trace %s parent %s", s.SpanContext.TraceID(), s.Parent.SpanID(), s.Parent.IsRemote(), clientTraceID, clientSpanID)
	}
	if want := "00-" + clientTraceID + "-" + s.SpanContext.SpanID().String() + "-01"; meta.Traceparent != want {
		t.Errorf("server got traceparent %q, want the gateway span's %q", meta.Traceparent, want)
	}
	if meta.Tracestate != "k=v" || string(meta.X) != `{"a":[1,2]}` {
		t.Errorf("server got tracestate %q and x %s, want the client's", meta.Tracestate, meta.X)
	}
	wantAttr(t, s, "mcp.method.name", "tools/call")
	wantAttr(t, s, "gen_ai.tool.name", "meta")
	wantAttr(t, s, "mcpgate.target", "fake")
	wantAttr(t, s, "jsonrpc.request.id", "7")
	wantAttr(t, s, "network.transport", "tcp")
	wantAttr(t, s, "mcp.protocol.version", c.version)
	wantAttr(t, s, "mcp.session.id", c.session[:8])
	if s.Status.Code == codes.Error {
		t.Errorf("status %v, want not an error", s.Status)
	}
	if in := spanNamed(t, exp, "initialize"); in.Parent.IsValid() {
		t.Errorf("initialize without trace context has parent %s", in.Parent.SpanID())
	}
}

// Without _meta's, the HTTP request's traceparent header is the parent.
func TestTraceParentFromHeader(t *testing.T) {
	exp := withSpans(t)
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)
	c.header.Set("traceparent", clientTP)
	serverMeta(t, c, `"h"`, "")
	s := spanNamed(t, exp, "tools/call meta")
	if s.SpanContext.TraceID().String() != clientTraceID || s.Parent.SpanID().String() != clientSpanID {
		t.Errorf("span trace %s parent %s, want the header's %s %s", s.SpanContext.TraceID(), s.Parent.SpanID(), clientTraceID, clientSpanID)
	}
	wantAttr(t, s, "jsonrpc.request.id", "h")
}

// An error reply makes the span an error, with its code.
func TestTraceErrorReply(t *testing.T) {
	exp := withSpans(t)
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)
	if m := c.post(t, callBody("1", "no_such_tool", map[string]any{}, "")).final(t); m.Error == nil {
		t.Fatalf("no error: %s", m.Result)
	}
	s := spanNamed(t, exp, "tools/call no_such_tool")
	if s.Status.Code != codes.Error {
		t.Errorf("status %v, want Error", s.Status)
	}
	wantAttr(t, s, "rpc.jsonrpc.error_code", "-32602")
	wantAttr(t, s, "error.type", "-32602")

	// Resources are named by URI in an attribute, not in the span's name.
	c.post(t, `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///nothing"}}`)
	wantAttr(t, spanNamed(t, exp, "resources/read"), "mcp.resource.uri", "file:///nothing")
}

// A batch is one span per request, each with its own parent.
func TestTraceBatchOneSpanPerRequest(t *testing.T) {
	exp := withSpans(t)
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.version = "2025-03-26" // the last revision with batches
	c.connect(t)
	var batch []string
	for i := range 3 {
		tp := fmt.Sprintf("00-%s-%016x-01", clientTraceID, i+1)
		batch = append(batch, callBody(fmt.Sprint(i+1), "echo", map[string]any{"message": "m"}, `{"traceparent":"`+tp+`"}`))
	}
	r := c.post(t, "["+strings.Join(batch, ",")+"]")
	if len(r.Msgs) != 3 {
		t.Fatalf("%d replies to a batch of 3", len(r.Msgs))
	}
	var ids, parents []string
	for _, s := range exp.GetSpans() {
		if s.Name == "tools/call echo" {
			v, _ := attr(s, "jsonrpc.request.id")
			ids = append(ids, v.Emit())
			parents = append(parents, s.Parent.SpanID().String())
		}
	}
	slices.Sort(ids)
	slices.Sort(parents)
	if !slices.Equal(ids, []string{"1", "2", "3"}) || !slices.Equal(parents, []string{"0000000000000001", "0000000000000002", "0000000000000003"}) {
		t.Errorf("spans of ids %v with parents %v, want one per request", ids, parents)
	}
}

// With tracing off, nothing is added: the server sees the client's _meta
// byte for byte, and none when the client sent none.
func TestTraceOffLeavesMetaAlone(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	if g.gw.tracing != nil {
		t.Fatal("tracing on without an endpoint")
	}
	c := g.client("fake")
	c.connect(t)
	c.header.Set("traceparent", clientTP)
	meta := `{"traceparent":"` + clientTP + `","tracestate":"k=v","x":{"a":[1,2]}}`
	if got := serverMeta(t, c, "1", meta); got != meta {
		t.Errorf("server got _meta %s, want %s", got, meta)
	}
	if got := serverMeta(t, c, "2", ""); got != "" {
		t.Errorf("server got _meta %s, want none", got)
	}
}

// The real OTLP/HTTP exporter, configured by OTEL_* variables alone,
// delivers the spans to a collector by the time the gateway stopped.
func TestTraceOTLPExport(t *testing.T) {
	var (
		mu      sync.Mutex
		names   []string
		service string
		token   string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		token = r.Header.Get("X-Token")
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Header().Set("Connection", "close") // no idle connection outlives the test
		_, _ = w.Write(out)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-token=secret")
	t.Setenv("OTEL_SERVICE_NAME", "gw-under-test")

	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	if g.gw.tracing == nil {
		t.Fatal("tracing off with an endpoint")
	}
	c := g.client("fake")
	c.connect(t)
	if got := toolText(t, c.post(t, callBody("1", "echo", map[string]any{"message": "hi"}, "")).final(t)); got != "hi" {
		t.Fatalf("echo: %q", got)
	}
	if err := g.stop(); err != nil { // flushes the batch
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(names, "initialize") || !slices.Contains(names, "tools/call echo") {
		t.Errorf("collector got spans %v, want initialize and tools/call echo", names)
	}
	if service != "gw-under-test" || token != "secret" {
		t.Errorf("collector got service.name %q and X-Token %q", service, token)
	}
}

// A request its client abandons (a JSON waiter of 2025-06-18 that
// disconnects) ends its span as cancelled.
func TestTraceAbandonedRequestCancelled(t *testing.T) {
	exp := withSpans(t)
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.version = "2025-06-18"
	c.connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	req := c.request(http.MethodPost, callBody("1", "slow", map[string]int{"ms": 600000}, "")).WithContext(ctx)
	errc := make(chan error, 1)
	go func() {
		resp, err := c.g.http.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	testkit.WaitFor(t, "the slow call to be in flight", func() bool { return g.pending("fake") == 1 })
	cancel()
	<-errc
	testkit.WaitFor(t, "the slow call's span to end", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "tools/call slow" {
				return true
			}
		}
		return false
	})
	s := spanNamed(t, exp, "tools/call slow")
	if s.Status.Code != codes.Error || s.Status.Description != "cancelled" {
		t.Errorf("status %v, want Error \"cancelled\"", s.Status)
	}
	wantAttr(t, s, "error.type", "cancelled")
}

// A stateless request (2026-07-28) is traced from its _meta too, and the
// server behind (here of the session eras, translated) gets the gateway's
// trace context beside what the translation keeps.
func TestTraceStatelessRequest(t *testing.T) {
	exp := withSpans(t)
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"meta","arguments":{},` +
		`"_meta":{"traceparent":"` + clientTP + `","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/servers/fake/mcp", strings.NewReader(body))
	for k, v := range map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "meta",
	} {
		req.Header.Set(k, v)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var m rpc
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("reply %s: %v", raw, err)
	}
	got := toolText(t, m)
	s := spanNamed(t, exp, "tools/call meta")
	if s.Parent.SpanID().String() != clientSpanID {
		t.Errorf("parent %s, want %s", s.Parent.SpanID(), clientSpanID)
	}
	wantAttr(t, s, "mcp.protocol.version", "2026-07-28")
	if want := "00-" + clientTraceID + "-" + s.SpanContext.SpanID().String() + "-01"; !strings.Contains(got, want) {
		t.Errorf("server got _meta %s, want traceparent %s", got, want)
	}
}

// An endpoint's request is one span, of the endpoint (the servers behind
// it are reached without a span of their own).
func TestTraceEndpointRequest(t *testing.T) {
	exp := withSpans(t)
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Endpoints["team"] = config.NewEndpoint("team", []string{"a"})
	g := startGateway(t, cfg)
	c := g.endpointClient("team")
	c.connect(t)
	waitTools(t, c, "a__echo")
	if got := toolText(t, c.post(t, callBody("1", "a__echo", map[string]any{"message": "hi"}, `{"traceparent":"`+clientTP+`"}`)).final(t)); got != "hi" {
		t.Fatalf("echo: %q", got)
	}
	s := spanNamed(t, exp, "tools/call a__echo")
	wantAttr(t, s, "mcpgate.target", "endpoints/team")
	if s.Parent.SpanID().String() != clientSpanID {
		t.Errorf("parent %s, want %s", s.Parent.SpanID(), clientSpanID)
	}
	for _, other := range exp.GetSpans() {
		if other.Name == "tools/call echo" {
			t.Errorf("a span of the server behind the endpoint: %v", other.Name)
		}
	}
}
