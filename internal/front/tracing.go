package front

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file traces client requests (Config.Tracer): each JSON-RPC request
// a client sends to a target, alone or in a batch, on any URL of any era,
// is one SERVER span, named and described as the OpenTelemetry semantic
// conventions for MCP say ("tools/call NAME", mcp.method.name, ...). Its
// parent is the trace context in the request's params._meta, else the one
// in the HTTP request's headers (TraceContext), else none. The request goes
// on to the server with the span's own context in params._meta, so a
// server that reads it continues the trace. The span ends when the final
// reply passes (Error status for a JSON-RPC error or a tool's isError), or
// when the client abandons the request ("cancelled").
//
// As policy.go does, a target's Backend is wrapped (conn.Wrap), outermost
// (a request a policy refuses has its span too: layers.go). Without a
// Tracer nothing is wrapped and no message is touched.

// propagator is the W3C trace context, the one MCP's _meta carries.
var propagator = propagation.TraceContext{}

// traceHTTPKey is the context key of a request's traceHTTP.
type traceHTTPKey struct{}

// traceHTTP is what a request's HTTP headers say for its spans.
type traceHTTP struct {
	session string // the first 8 characters of Mcp-Session-Id
	version string // MCP-Protocol-Version
}

// TraceContext returns next with the W3C trace context of each request's
// headers (traceparent, tracestate) in the request's context, the parent of
// the spans of its JSON-RPC requests that carry none in their _meta. Use it
// with Config.Tracer.
func TraceContext(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		th := traceHTTP{version: r.Header.Get("MCP-Protocol-Version")}
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			// The id is a bearer credential: only a prefix, to tell sessions
			// apart in a trace.
			th.session = id[:min(len(id), 8)]
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, traceHTTPKey{}, th)))
	})
}

// traceLayer is the Layer tracing the requests of target (a server's
// name, or an endpoint's key) with tr: it adds nothing to the general
// stream.
func traceLayer(tr trace.Tracer, target string) conn.Layer {
	mw := func(c conn.Conn) conn.Conn {
		return &tracedConn{Conn: c, tr: tr, target: target, spans: map[conn.Stream]map[*traceStream]struct{}{}}
	}
	return func(_ context.Context, general conn.Stream) (conn.Stream, conn.Middleware) { return general, mw }
}

// tracedConn is a Conn whose requests are traced.
type tracedConn struct {
	conn.Conn
	tr     trace.Tracer
	target string

	mu    sync.Mutex
	spans map[conn.Stream]map[*traceStream]struct{} // guards: mu. Requests in flight, by the stream they answer on
}

// Handle starts a request's span and hands the request on with the span's
// trace context in its _meta.
func (c *tracedConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.Kind != jsonrpc.KindRequest || out == nil {
		c.Conn.Handle(ctx, msg, out)
		return
	}
	tm := readTraceMeta(msg)
	parent := ctx
	if tm.traceparent != "" {
		// An invalid traceparent leaves ctx's (the headers') in place.
		parent = propagator.Extract(ctx, propagation.MapCarrier{metaTraceparent: tm.traceparent, metaTracestate: tm.tracestate})
	}
	name, attrs := c.describe(ctx, msg, tm)
	sctx, span := c.tr.Start(parent, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if tm.ok {
		carrier := propagation.MapCarrier{}
		propagator.Inject(sctx, carrier)
		if tp := carrier[metaTraceparent]; tp != "" {
			if m, err := jsonrpc.Parse(withTraceMeta(msg, tm, tp, carrier[metaTracestate])); err == nil {
				msg = &m
			}
		}
	}
	c.Conn.Handle(sctx, msg, c.track(&traceStream{Stream: out, c: c, span: span}))
}

// describe returns a request's span name and attributes.
func (c *tracedConn) describe(ctx context.Context, msg *jsonrpc.Message, tm traceMeta) (string, []attribute.KeyValue) {
	method := strings.Clone(msg.MethodName())
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		attribute.String("mcp.method.name", method),
		attribute.String("mcpgate.target", c.target),
		attribute.String("network.transport", "tcp"),
		attribute.String("network.protocol.name", "http"),
	)
	if id := msg.Bytes(msg.ID); len(id) > 0 {
		s := string(id)
		if id[0] == '"' {
			if u, err := jsontext.AppendUnquote(nil, id); err == nil {
				s = string(u)
			}
		}
		attrs = append(attrs, attribute.String("jsonrpc.request.id", s))
	}
	th, _ := ctx.Value(traceHTTPKey{}).(traceHTTP)
	version := tm.version
	if version == "" {
		version = c.Version()
	}
	if version == "" {
		version = th.version
	}
	if version != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", version))
	}
	if th.session != "" {
		attrs = append(attrs, attribute.String("mcp.session.id", th.session))
	}
	name := method
	switch method {
	case protocol.MethodToolsCall, protocol.MethodPromptsGet, protocol.MethodResourcesRead, protocol.MethodResourcesSubscribe, protocol.MethodResourcesUnsubscribe:
		cp, err := conn.ReadParams(msg)
		if err != nil {
			break
		}
		switch method {
		case protocol.MethodToolsCall:
			name += " " + cp.Name
			attrs = append(attrs, attribute.String("gen_ai.tool.name", cp.Name), attribute.String("gen_ai.operation.name", "execute_tool"))
		case protocol.MethodPromptsGet:
			name += " " + cp.Name
			attrs = append(attrs, attribute.String("gen_ai.prompt.name", cp.Name))
		default:
			// A URI is no low-cardinality name: an attribute only.
			attrs = append(attrs, attribute.String("mcp.resource.uri", cp.URI))
		}
	}
	return name, attrs
}

// Abandon abandons the requests answering on out, ending their spans as
// cancelled.
func (c *tracedConn) Abandon(out conn.Stream) {
	c.mu.Lock()
	ss := c.spans[out]
	delete(c.spans, out)
	c.mu.Unlock()
	for s := range ss {
		s.cancelled()
		c.Conn.Abandon(s)
	}
	c.Conn.Abandon(out)
}

// track registers s as answering on s.Stream, for Abandon, and returns it.
func (c *tracedConn) track(s *traceStream) *traceStream {
	c.mu.Lock()
	if c.spans[s.Stream] == nil {
		c.spans[s.Stream] = map[*traceStream]struct{}{}
	}
	c.spans[s.Stream][s] = struct{}{}
	c.mu.Unlock()
	return s
}

// untrack forgets s.
func (c *tracedConn) untrack(s *traceStream) {
	c.mu.Lock()
	if set := c.spans[s.Stream]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(c.spans, s.Stream)
		}
	}
	c.mu.Unlock()
}

// traceStream is the stream of one traced request: its final reply ends
// its span.
type traceStream struct {
	conn.Stream
	c    *tracedConn
	span trace.Span
	done atomic.Bool // the span ended
}

// Reply ends the span before the reply goes on, so that a client holding
// the reply finds the span ended.
func (s *traceStream) Reply(msg []byte) {
	s.c.untrack(s)
	if s.done.CompareAndSwap(false, true) {
		if msg == nil {
			s.span.SetStatus(codes.Error, "cancelled")
			s.span.SetAttributes(attribute.String("error.type", "cancelled"))
		} else {
			replyStatus(s.span, msg)
		}
		s.span.End()
	}
	s.Stream.Reply(msg)
}

// cancelled ends the span of a request its client abandoned.
func (s *traceStream) cancelled() {
	if s.done.CompareAndSwap(false, true) {
		s.span.SetStatus(codes.Error, "cancelled")
		s.span.SetAttributes(attribute.String("error.type", "cancelled"))
		s.span.End()
	}
}

// replyStatus records on span what reply says of the request: a JSON-RPC
// error (error.type its code, as the conventions for MCP say), or a tool
// result with isError ("tool_error").
func replyStatus(span trace.Span, reply []byte) {
	m, err := jsonrpc.Parse(reply)
	if err != nil {
		return
	}
	whole := wholeSpan(reply)
	if m.IsError {
		code, text := 0, ""
		eachMember(reply, whole, func(name string, _, v jsonrpc.Span) {
			if name != "error" || reply[v.Start] != '{' {
				return
			}
			eachMember(reply, v, func(name string, _, v jsonrpc.Span) {
				switch name {
				case "code":
					code, _ = strconv.Atoi(string(reply[v.Start:v.End]))
				case "message":
					if u, err := jsontext.AppendUnquote(nil, reply[v.Start:v.End]); err == nil {
						text = string(u)
					}
				}
			})
		})
		span.SetAttributes(
			attribute.String("error.type", strconv.Itoa(code)),
			attribute.Int("rpc.jsonrpc.error_code", code),
			attribute.String("rpc.response.status_code", strconv.Itoa(code)),
		)
		span.SetStatus(codes.Error, text)
		return
	}
	if !bytes.Contains(reply, []byte(`isError`)) {
		return
	}
	isErr := false
	eachMember(reply, whole, func(name string, _, v jsonrpc.Span) {
		if name != "result" || reply[v.Start] != '{' {
			return
		}
		eachMember(reply, v, func(name string, _, v jsonrpc.Span) {
			isErr = isErr || name == "isError" && string(reply[v.Start:v.End]) == "true"
		})
	})
	if isErr {
		span.SetAttributes(attribute.String("error.type", "tool_error"))
		span.SetStatus(codes.Error, "tool_error")
	}
}
