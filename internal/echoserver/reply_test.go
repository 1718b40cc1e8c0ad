package echoserver

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAppendReply(t *testing.T) {
	tests := []struct {
		name, msg, want, version string
		replied                  bool
	}{
		{"echo keeps the raw string and id", `{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"echo","arguments":{"message":"a \"q\" \u00e9"}}}`,
			`{"jsonrpc":"2.0","id":"x-1","result":{"content":[{"type":"text","text":"a \"q\" \u00e9"}]}}`, "", true},
		{"echo with members in any order", `{"params":{"arguments":{"other":[1,{"message":"no"}],"message":"yes"},"name":"echo"},"method":"tools/call","id":12345678901234567890123,"jsonrpc":"2.0"}`,
			`{"jsonrpc":"2.0","id":12345678901234567890123,"result":{"content":[{"type":"text","text":"yes"}]}}`, "", true},
		{"unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown tool add"}}`, "", true},
		{"message not a string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":7}}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"arguments.message must be a string"}}`, "", true},
		{"initialize supported", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"mcpecho","version":"1.0.0"}}}`, "2025-06-18", true},
		{"initialize 2024-11-05", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"mcpecho","version":"1.0.0"}}}`, "2024-11-05", true},
		{"initialize unknown version gets latest", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}`,
			`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"mcpecho","version":"1.0.0"}}}`, "2025-11-25", true},
		{"ping", `{"jsonrpc":"2.0","id":"p","method":"ping"}`, `{"jsonrpc":"2.0","id":"p","result":{}}`, "", true},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"resources/list"}`,
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"method not found"}}`, "", true},
		{"stateless echo", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"message":"m"}}}`,
			`{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[{"type":"text","text":"m"}]}}`, "2026-07-28", true},
		{"stateless echo, _meta last and escaped key", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"},"_meta":{"x":[1],"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}`,
			`{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","content":[{"type":"text","text":"m"}]}}`, "2026-07-28", true},
		{"_meta without the version is a session era's", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"echo","arguments":{"message":"m"}}}`,
			`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"m"}]}}`, "", true},
		{"stateless unknown tool", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"add"}}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"unknown tool add"}}`, "2026-07-28", true},
		{"stateless unsupported version", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999"},"name":"echo","arguments":{"message":"m"}}}`,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"v999"}}}`, "v999", true},
		{"stateless tools/list", `{"jsonrpc":"2.0","id":"l","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			`{"jsonrpc":"2.0","id":"l","result":{"resultType":"complete","tools":[{"name":"echo","description":"Returns its message argument as text.",` +
				`"inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}],"ttlMs":0,"cacheScope":"public"}}`, "2026-07-28", true},
		{"server/discover", `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			`{"jsonrpc":"2.0","id":"d","result":{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26"],` +
				`"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpecho","version":"1.0.0"}}}}`, "2026-07-28", true},
		{"stateless unknown method", `{"jsonrpc":"2.0","id":5,"method":"prompts/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"method not found"}}`, "2026-07-28", true},
		{"stateless ping is gone", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"method not found"}}`, "2026-07-28", true},
		{"ping with params", `{"jsonrpc":"2.0","id":5,"method":"ping","params":{}}`, `{"jsonrpc":"2.0","id":5,"result":{}}`, "", true},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "", false},
		{"response", `{"jsonrpc":"2.0","id":9,"result":{}}`, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, version, replied := AppendReply([]byte("prefix:"), []byte(tt.msg))
			if replied != tt.replied || version != tt.version || string(got) != "prefix:"+tt.want {
				t.Errorf("AppendReply(%s)\n = %s, %q, %v\nwant prefix:%s, %q, %v", tt.msg, got, version, replied, tt.want, tt.version, tt.replied)
			}
		})
	}
}

func TestAppendReplyToolsListAndGarbage(t *testing.T) {
	got, _, _ := AppendReply(nil, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	if !strings.Contains(string(got), `"name":"echo"`) || !strings.HasPrefix(string(got), `{"jsonrpc":"2.0","id":2,"result":{"tools":[`) {
		t.Errorf("tools/list = %s", got)
	}
	got, _, replied := AppendReply(nil, []byte(`{"jsonrpc":`))
	if !replied || !strings.Contains(string(got), `"id":null,"error":{"code":-32700`) {
		t.Errorf("garbage = %s, %v; want a parse error with id null", got, replied)
	}
}

func BenchmarkAppendReplyEcho(b *testing.B) {
	for _, bm := range []struct{ name, msg string }{
		{"session", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"message":"abc-s1-c0-12345"}}}`},
		{"stateless", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"message":"abc-s1-c0-12345"}}}`},
	} {
		b.Run(bm.name, func(b *testing.B) {
			msg := []byte(bm.msg)
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				buf, _, _ = AppendReply(buf[:0], msg)
			}
		})
	}
}

// FuzzAppendReply: whatever the message, the fixture answers without
// panicking, and what it writes is one valid JSON value.
func FuzzAppendReply(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"message":"a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v\u0031"},"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{}}}`,
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":[]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		out, _, replied := AppendReply(nil, msg)
		if replied && !jsontext.Value(out).IsValid() {
			t.Fatalf("reply to %q is not valid JSON: %q", msg, out)
		}
	})
}
