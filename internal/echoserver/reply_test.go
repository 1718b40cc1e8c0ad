package echoserver

import (
	"strings"
	"testing"

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
	msg := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"message":"abc-s1-c0-12345"}}}`)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _, _ = AppendReply(buf[:0], msg)
	}
}
