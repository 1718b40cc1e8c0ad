package eras

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// hdr builds headers from name, value pairs (a name may repeat).
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func parse(t testing.TB, s string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse(%s): %v", s, err)
	}
	return &m
}

// meta is a valid modern _meta with extra members appended.
func meta(extra string) string {
	return `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}` + extra + `}`
}

// req is a modern request of method with the given params.
func req(method, params string) string {
	return `{"jsonrpc":"2.0","id":42,"method":"` + method + `","params":` + params + `}`
}

// std are the headers a conforming client sends for method (and name).
func std(method string, name ...string) http.Header {
	h := hdr(HeaderProtocolVersion, protocol.StatelessVersion, HeaderMethod, method)
	if len(name) > 0 {
		h.Set(HeaderName, name[0])
	}
	return h
}

func TestCheck(t *testing.T) {
	const pv, caps = protocol.MetaProtocolVersion, protocol.MetaClientCapabilities
	tests := []struct {
		name    string
		h       http.Header
		body    string
		status  int    // 0: accepted
		code    int    //
		message string // exact when status != 0
		data    string // exact error.data, "" for none
		want    Request
	}{
		// Accepted.
		{name: "tools/list", h: std("tools/list"), body: req("tools/list", `{"_meta":`+meta("")+`}`),
			want: Request{Method: "tools/list", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`)}},
		{name: "clientInfo is optional, log level read", h: std("server/discover"),
			body: req("server/discover", `{"_meta":`+meta(`,"io.modelcontextprotocol/logLevel":"warning"`)+`}`),
			want: Request{Method: "server/discover", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`), LogLevel: "warning"}},
		{name: "escaped keys and method", h: std("tools/list"),
			body: `{"jsonrpc":"2.0","id":1,"method":"tools\/list","params":{"\u005fmeta":{"io.modelcontextprotocol\/protocolVersion":"2026\u002d07-28","io.modelcontextprotocol\/clientCapabilities":{ }}}}`,
			want: Request{Method: "tools/list", Version: protocol.StatelessVersion, Capabilities: []byte(`{ }`)}},
		{name: "tools/call plain name", h: std("tools/call", "get_weather"),
			body: req("tools/call", `{"name":"get_weather","arguments":{},"_meta":`+meta("")+`}`),
			want: Request{Method: "tools/call", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`)}},
		{name: "prompts/get base64 name", h: std("prompts/get", "=?base64?SGVsbG8sIOS4lueVjA==?="),
			body: req("prompts/get", `{"name":"Hello, 世界","_meta":`+meta("")+`}`),
			want: Request{Method: "prompts/get", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`)}},
		{name: "resources/read sentinel-looking uri", h: std("resources/read", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
			body: req("resources/read", `{"uri":"=?base64?literal?=","_meta":`+meta("")+`}`),
			want: Request{Method: "resources/read", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`)}},
		// What real clients send, accepted (the body decides).
		{name: "claude connector: older header, modern body, no Mcp-Method or Mcp-Name", h: hdr(HeaderProtocolVersion, "2025-11-25"),
			body: req("tools/call", `{"name":"echo","_meta":`+meta("")+`}`),
			want: Request{Method: "tools/call", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`), OlderHeader: "2025-11-25"}},
		{name: "older header with the revision's headers", h: hdr(HeaderProtocolVersion, "2025-06-18", HeaderMethod, "tools/call", HeaderName, "echo"),
			body: req("tools/call", `{"name":"echo","_meta":`+meta("")+`}`),
			want: Request{Method: "tools/call", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`), OlderHeader: "2025-06-18"}},
		{name: "the same version twice in one line", h: hdr(HeaderProtocolVersion, protocol.StatelessVersion+", "+protocol.StatelessVersion, HeaderMethod, "tools/list"),
			body: req("tools/list", `{"_meta":`+meta("")+`}`),
			want: Request{Method: "tools/list", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`), RepeatedHeader: true}},
		{name: "the same version on two lines", h: hdr(HeaderProtocolVersion, protocol.StatelessVersion, "mcp-protocol-version", protocol.StatelessVersion, HeaderMethod, "tools/list"),
			body: req("tools/list", `{"_meta":`+meta("")+`}`),
			want: Request{Method: "tools/list", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`), RepeatedHeader: true}},
		{name: "an older version twice, modern body", h: hdr(HeaderProtocolVersion, "2025-11-25, 2025-11-25"),
			body: req("tools/list", `{"_meta":`+meta("")+`}`),
			want: Request{Method: "tools/list", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`), OlderHeader: "2025-11-25", RepeatedHeader: true}},
		{name: "unknown method is left to the server", h: std("unknown/method"),
			body: req("unknown/method", `{"_meta":`+meta("")+`}`),
			want: Request{Method: "unknown/method", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`)}},

		// Refused, in the order Check applies the rules.
		{name: "response", h: std("tools/list"), body: `{"jsonrpc":"2.0","id":1,"result":{}}`,
			status: 400, code: -32600, message: "Invalid Request: clients do not send responses in protocol version 2026-07-28"},
		{name: "no MCP-Protocol-Version", h: hdr(HeaderMethod, "tools/list"), body: req("tools/list", `{}`),
			status: 400, code: -32020, message: "Header mismatch: missing required MCP-Protocol-Version header"},
		{name: "empty MCP-Protocol-Version", h: hdr(HeaderProtocolVersion, "", HeaderMethod, "tools/list"), body: req("tools/list", `{"_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: missing required MCP-Protocol-Version header"},
		{name: "two different MCP-Protocol-Version lines", h: hdr(HeaderProtocolVersion, protocol.StatelessVersion, "mcp-protocol-version", "2025-11-25", HeaderMethod, "tools/list"), body: req("tools/list", `{"_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: MCP-Protocol-Version header given with different values"},
		{name: "two different MCP-Protocol-Version values", h: hdr(HeaderProtocolVersion, "2025-11-25, 2026-07-28", HeaderMethod, "tools/list"), body: req("tools/list", `{"_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: MCP-Protocol-Version header given with different values"},
		{name: "older header, unknown body version", h: hdr(HeaderProtocolVersion, "2025-11-25", HeaderMethod, "tools/list"),
			body:   req("tools/list", `{"_meta":{"`+pv+`":"v999.0.0","`+caps+`":{}}}`),
			status: 400, code: -32020, message: "Header mismatch: MCP-Protocol-Version header value '2025-11-25' does not match body value 'v999.0.0'"},
		{name: "unknown header, modern body", h: hdr(HeaderProtocolVersion, "2099-01-01", HeaderMethod, "tools/list"), body: req("tools/list", `{"_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: MCP-Protocol-Version header value '2099-01-01' does not match body value '2026-07-28'"},
		{name: "older header, Mcp-Method sent and wrong", h: hdr(HeaderProtocolVersion, "2025-11-25", HeaderMethod, "tools/call"), body: req("tools/list", `{"_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: Mcp-Method header value 'tools/call' does not match body value 'tools/list'"},
		{name: "older header, Mcp-Name sent and wrong", h: hdr(HeaderProtocolVersion, "2025-11-25", HeaderName, "foo"), body: req("tools/call", `{"name":"bar","_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: Mcp-Name header value 'foo' does not match body value 'bar'"},
		{name: "no params", h: std("tools/list"), body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			status: 400, code: -32602, message: "Invalid params: params._meta is required and must be an object"},
		{name: "no _meta", h: std("server/discover"), body: req("server/discover", `{}`),
			status: 400, code: -32602, message: "Invalid params: params._meta is required and must be an object"},
		{name: "_meta null", h: std("tools/list"), body: req("tools/list", `{"_meta":null}`),
			status: 400, code: -32602, message: "Invalid params: params._meta is required and must be an object"},
		{name: "params array", h: std("tools/list"), body: req("tools/list", `[{"_meta":`+meta("")+`}]`),
			status: 400, code: -32602, message: "Invalid params: params._meta is required and must be an object"},
		{name: "no protocolVersion", h: std("tools/list"), body: req("tools/list", `{"_meta":{"`+caps+`":{}}}`),
			status: 400, code: -32602, message: `Invalid params: _meta field "io.modelcontextprotocol/protocolVersion" is required and must be a string`},
		{name: "protocolVersion not a string", h: std("tools/list"), body: req("tools/list", `{"_meta":{"`+pv+`":20260728,"`+caps+`":{}}}`),
			status: 400, code: -32602, message: `Invalid params: _meta field "io.modelcontextprotocol/protocolVersion" is required and must be a string`},
		{name: "protocolVersion at the wrong level", h: std("tools/list"), body: req("tools/list", `{"`+pv+`":"2026-07-28","_meta":{"`+caps+`":{}}}`),
			status: 400, code: -32602, message: `Invalid params: _meta field "io.modelcontextprotocol/protocolVersion" is required and must be a string`},
		{name: "no clientCapabilities", h: std("tools/list"), body: req("tools/list", `{"_meta":{"`+pv+`":"2026-07-28","`+protocol.MetaClientInfo+`":{"name":"c","version":"1"}}}`),
			status: 400, code: -32602, message: `Invalid params: _meta field "io.modelcontextprotocol/clientCapabilities" is required and must be an object`},
		{name: "clientCapabilities an array", h: std("tools/list"), body: req("tools/list", `{"_meta":{"`+pv+`":"2026-07-28","`+caps+`":[]}}`),
			status: 400, code: -32602, message: `Invalid params: _meta field "io.modelcontextprotocol/clientCapabilities" is required and must be an object`},
		{name: "header differs from _meta", h: std("server/discover"), body: req("server/discover", `{"_meta":{"`+pv+`":"v999.0.0","`+caps+`":{}}}`),
			status: 400, code: -32020, message: "Header mismatch: MCP-Protocol-Version header value '2026-07-28' does not match body value 'v999.0.0'"},
		{name: "no Mcp-Method", h: hdr(HeaderProtocolVersion, protocol.StatelessVersion), body: req("tools/list", `{"_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: missing required Mcp-Method header"},
		{name: "Mcp-Method differs in case", h: std("Tools/List"), body: req("tools/list", `{"_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: Mcp-Method header value 'Tools/List' does not match body value 'tools/list'"},
		{name: "no Mcp-Name for tools/call", h: std("tools/call"), body: req("tools/call", `{"name":"bar","_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: missing required Mcp-Name header"},
		{name: "no Mcp-Name for prompts/get", h: std("prompts/get"), body: req("prompts/get", `{"name":"bar","_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: missing required Mcp-Name header"},
		{name: "no Mcp-Name for resources/read", h: std("resources/read"), body: req("resources/read", `{"uri":"file:///a","_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: missing required Mcp-Name header"},
		{name: "Mcp-Name differs", h: std("tools/call", "foo"), body: req("tools/call", `{"name":"bar","_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: Mcp-Name header value 'foo' does not match body value 'bar'"},
		{name: "Mcp-Name is the name, not the uri", h: std("resources/read", "a"), body: req("resources/read", `{"name":"a","uri":"file:///a","_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: Mcp-Name header value 'a' does not match body value 'file:///a'"},
		{name: "Mcp-Name decodes to something else", h: std("tools/call", "=?base64?IHBhZGRlZCA=?="), body: req("tools/call", `{"name":"padded","_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: Mcp-Name header value '=?base64?IHBhZGRlZCA=?=' does not match body value 'padded'"},
		{name: "Mcp-Name bad base64", h: std("tools/call", "=?base64?literal?="), body: req("tools/call", `{"name":"=?base64?literal?=","_meta":`+meta("")+`}`),
			status: 400, code: -32020, message: "Header mismatch: Mcp-Name header value '=?base64?literal?=' is not valid =?base64?...?= encoding"},
		{name: "no params.name", h: std("tools/call", "x"), body: req("tools/call", `{"_meta":`+meta("")+`}`),
			status: 400, code: -32602, message: "Invalid params: params.name is required for tools/call and must be a string"},
		{name: "params.uri not a string", h: std("resources/read", "1"), body: req("resources/read", `{"uri":1,"_meta":`+meta("")+`}`),
			status: 400, code: -32602, message: "Invalid params: params.uri is required for resources/read and must be a string"},
		{name: "unsupported version", h: hdr(HeaderProtocolVersion, "v999.0.0", HeaderMethod, "server/discover"),
			body:   req("server/discover", `{"_meta":{"`+pv+`":"v999.0.0","`+caps+`":{}}}`),
			status: 400, code: -32022, message: "Unsupported protocol version", data: `{"supported":["2026-07-28"],"requested":"v999.0.0"}`},
		{name: "legacy version in modern _meta", h: hdr(HeaderProtocolVersion, "2025-11-25", HeaderMethod, "tools/list"),
			body:   req("tools/list", `{"_meta":{"`+pv+`":"2025-11-25","`+caps+`":{}}}`),
			status: 400, code: -32022, message: "Unsupported protocol version", data: `{"supported":["2026-07-28"],"requested":"2025-11-25"}`},
		{name: "unsupported version before removed method", h: hdr(HeaderProtocolVersion, "1900-01-01", HeaderMethod, "ping"),
			body:   req("ping", `{"_meta":{"`+pv+`":"1900-01-01","`+caps+`":{}}}`),
			status: 400, code: -32022, message: "Unsupported protocol version", data: `{"supported":["2026-07-28"],"requested":"1900-01-01"}`},
		{name: "initialize removed", h: std("initialize"), body: req("initialize", `{"_meta":`+meta("")+`}`),
			status: 404, code: -32601, message: `Method not found: "initialize" is not part of protocol version 2026-07-28`},
		{name: "ping removed", h: std("ping"), body: req("ping", `{"_meta":`+meta("")+`}`),
			status: 404, code: -32601, message: `Method not found: "ping" is not part of protocol version 2026-07-28`},
		{name: "logging/setLevel removed", h: std("logging/setLevel"), body: req("logging/setLevel", `{"level":"info","_meta":`+meta("")+`}`),
			status: 404, code: -32601, message: `Method not found: "logging/setLevel" is not part of protocol version 2026-07-28`},
		{name: "resources/subscribe removed", h: std("resources/subscribe"), body: req("resources/subscribe", `{"uri":"x","_meta":`+meta("")+`}`),
			status: 404, code: -32601, message: `Method not found: "resources/subscribe" is not part of protocol version 2026-07-28`},
		{name: "resources/unsubscribe removed", h: std("resources/unsubscribe"), body: req("resources/unsubscribe", `{"uri":"x","_meta":`+meta("")+`}`),
			status: 404, code: -32601, message: `Method not found: "resources/unsubscribe" is not part of protocol version 2026-07-28`},
		{name: "tasks removed", h: std("tasks/get"), body: req("tasks/get", `{"taskId":"t","_meta":`+meta("")+`}`),
			status: 404, code: -32601, message: `Method not found: "tasks/get" is not part of protocol version 2026-07-28`},
		{name: "removed method before bad log level", h: std("ping"), body: req("ping", `{"_meta":`+meta(`,"io.modelcontextprotocol/logLevel":"loud"`)+`}`),
			status: 404, code: -32601, message: `Method not found: "ping" is not part of protocol version 2026-07-28`},
		{name: "unknown log level", h: std("tools/list"), body: req("tools/list", `{"_meta":`+meta(`,"io.modelcontextprotocol/logLevel":"verbose"`)+`}`),
			status: 400, code: -32602, message: `Invalid params: _meta field "io.modelcontextprotocol/logLevel" must be one of debug, info, notice, warning, error, critical, alert, emergency`},
		{name: "log level not a string", h: std("tools/list"), body: req("tools/list", `{"_meta":`+meta(`,"io.modelcontextprotocol/logLevel":3`)+`}`),
			status: 400, code: -32602, message: `Invalid params: _meta field "io.modelcontextprotocol/logLevel" must be one of debug, info, notice, warning, error, critical, alert, emergency`},
		{name: "missing header wins over missing _meta", h: hdr(), body: req("tools/list", `{}`),
			status: 400, code: -32020, message: "Header mismatch: missing required MCP-Protocol-Version header"},
		{name: "bad _meta wins over missing Mcp-Method", h: hdr(HeaderProtocolVersion, protocol.StatelessVersion), body: req("tools/list", `{"_meta":{}}`),
			status: 400, code: -32602, message: `Invalid params: _meta field "io.modelcontextprotocol/protocolVersion" is required and must be a string`},

		// Notifications.
		{name: "notification accepted without headers", h: hdr(),
			body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":` + meta("") + `}}`,
			want: Request{Method: "notifications/cancelled", Version: protocol.StatelessVersion, Capabilities: []byte(`{"sampling":{}}`)}},
		{name: "notification without _meta", h: std("notifications/whatever"), body: `{"jsonrpc":"2.0","method":"notifications/whatever"}`,
			want: Request{Method: "notifications/whatever"}},
		{name: "notifications/initialized removed", h: std("notifications/initialized"), body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			status: 404, code: -32601, message: `Method not found: "notifications/initialized" is not part of protocol version 2026-07-28`},
		{name: "roots list_changed removed", h: hdr(), body: `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"_meta":` + meta("") + `}}`,
			status: 404, code: -32601, message: `Method not found: "notifications/roots/list_changed" is not part of protocol version 2026-07-28`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, p := Check(tt.h, parse(t, tt.body))
			if tt.status == 0 {
				if p != nil {
					t.Fatalf("refused: %v", p)
				}
				if got.Method != tt.want.Method || got.Version != tt.want.Version || got.LogLevel != tt.want.LogLevel ||
					string(got.Capabilities) != string(tt.want.Capabilities) ||
					got.OlderHeader != tt.want.OlderHeader || got.RepeatedHeader != tt.want.RepeatedHeader {
					t.Fatalf("got %+v (caps %s), want %+v (caps %s)", got, got.Capabilities, tt.want, tt.want.Capabilities)
				}
				return
			}
			if p == nil {
				t.Fatalf("accepted (%+v), want HTTP %d / %d", got, tt.status, tt.code)
			}
			if p.Status != tt.status || p.Code != tt.code || p.Message != tt.message || string(p.Data) != tt.data {
				t.Fatalf("got %d / %d %q data %s\nwant %d / %d %q data %s", p.Status, p.Code, p.Message, p.Data, tt.status, tt.code, tt.message, tt.data)
			}
		})
	}
}

func TestCheckRequestDoesNotAliasStrings(t *testing.T) {
	b := []byte(req("x/custom", `{"_meta":`+meta(`,"io.modelcontextprotocol/logLevel":"debug"`)+`}`))
	m, err := jsonrpc.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	got, p := Check(std("x/custom"), &m)
	if p != nil {
		t.Fatal(p)
	}
	for i := range b {
		b[i] = 'z'
	}
	if got.Method != "x/custom" || got.Version != protocol.StatelessVersion || got.LogLevel != "debug" {
		t.Fatalf("strings changed with the buffer: %+v", got)
	}
}

func TestProblemResponse(t *testing.T) {
	tests := []struct {
		name string
		p    Problem
		id   string
		want string
	}{
		{"with data", Problem{400, protocol.CodeUnsupportedVersion, "Unsupported protocol version", []byte(`{"supported":["2026-07-28"],"requested":"1900-01-01"}`)}, `1`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"1900-01-01"}}}`},
		{"without data", Problem{400, protocol.CodeHeaderMismatch, "Header mismatch: Mcp-Name header value 'foo' does not match body value 'bar'", nil}, `"a"`,
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32020,"message":"Header mismatch: Mcp-Name header value 'foo' does not match body value 'bar'"}}`},
		{"notification", Problem{404, -32601, "m", nil}, ``,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"m"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var id []byte
			if tt.id != "" {
				id = []byte(tt.id)
			}
			if got := string(tt.p.AppendResponse([]byte("x"), id)); got != "x"+tt.want {
				t.Fatalf("got  %s\nwant x%s", got, tt.want)
			}
		})
	}
	p := &Problem{404, -32601, "gone", nil}
	if got := p.Error(); got != "modern: gone (HTTP 404, JSON-RPC -32601)" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestCheckClipsEchoedValues(t *testing.T) {
	long := strings.Repeat("é", 100)
	_, p := Check(std("tools/call", "x"), parse(t, req("tools/call", `{"name":"`+long+`","_meta":`+meta("")+`}`)))
	if p == nil || !strings.HasSuffix(p.Message, "'"+strings.Repeat("é", 64)+"…'") {
		t.Fatalf("got %v", p)
	}
}
