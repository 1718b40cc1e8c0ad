package eras

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

func TestIsModern(t *testing.T) {
	withMeta := req("tools/list", `{"_meta":`+meta("")+`}`)
	tests := []struct {
		name   string
		header string
		body   string // "" for no message (a batch)
		want   bool
	}{
		{"no header, no _meta", "", req("tools/list", `{}`), false},
		{"legacy header", "2025-11-25", req("tools/list", `{}`), false},
		{"each legacy version", "2024-11-05", req("tools/call", `{"name":"x"}`), false},
		{"2025-03-26", "2025-03-26", req("tools/list", `{}`), false},
		{"2025-06-18", "2025-06-18", req("tools/list", `{}`), false},
		{"modern header", protocol.StatelessVersion, req("tools/list", `{}`), true},
		{"unknown header", "v999.0.0", req("tools/list", `{}`), true},
		{"_meta without header", "", withMeta, true},
		{"_meta with legacy header", "2025-06-18", withMeta, true},
		{"_meta protocolVersion of the wrong type", "", req("tools/list", `{"_meta":{"`+protocol.MetaProtocolVersion+`":1}}`), true},
		{"escaped _meta key", "", req("tools/list", `{"_m\u0065ta":{"io.modelcontextprotocol\/protocolVersion":"x"}}`), true},
		{"protocolVersion outside _meta", "", req("tools/list", `{"`+protocol.MetaProtocolVersion+`":"2026-07-28"}`), false},
		{"other _meta keys only", "", req("tools/list", `{"_meta":{"progressToken":1}}`), false},
		{"initialize with modern header only", protocol.StatelessVersion, req("initialize", `{"protocolVersion":"2025-11-25"}`), false},
		{"initialize with _meta", protocol.StatelessVersion, req("initialize", `{"_meta":`+meta("")+`}`), true},
		{"notification with modern header", protocol.StatelessVersion, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, true},
		{"response with legacy header", "2025-11-25", `{"jsonrpc":"2.0","id":1,"result":{}}`, false},
		{"batch with modern header", protocol.StatelessVersion, "", true},
		{"batch with legacy header", "2025-03-26", "", false},
		{"batch without header", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m *jsonrpc.Message
			if tt.body != "" {
				m = parse(t, tt.body)
			}
			if got := IsModern(tt.header, m); got != tt.want {
				t.Fatalf("IsModern(%q, %s) = %v", tt.header, tt.body, got)
			}
		})
	}
}

func TestIsInputRequest(t *testing.T) {
	tests := []struct {
		body string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`, true},
		{`{"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{}}`, true},
		{`{"jsonrpc":"2.0","id":2,"method":"roots/list"}`, true},
		{`{"jsonrpc":"2.0","id":3,"method":"ping"}`, false},
		{`{"jsonrpc":"2.0","method":"roots/list"}`, false}, // a notification is not a request
		{`{"jsonrpc":"2.0","id":4,"result":{"roots":[]}}`, false},
	}
	for _, tt := range tests {
		if got := IsInputRequest(parse(t, tt.body)); got != tt.want {
			t.Errorf("IsInputRequest(%s) = %v", tt.body, got)
		}
	}
}
