package jsonrpc

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

func TestConstructors(t *testing.T) {
	tests := []struct {
		name    string
		got     []byte
		want    string
		kind    Kind
		id      string
		method  string
		isError bool
	}{
		{"error response", ErrorResponse([]byte(`12345678901234567890123`), protocol.CodeRequestTimeout, "request timed out"),
			`{"jsonrpc":"2.0","id":12345678901234567890123,"error":{"code":-32001,"message":"request timed out"}}`,
			KindResponse, `12345678901234567890123`, "", true},
		{"error response null id", ErrorResponse(nil, protocol.CodeParseError, `bad "json"`+"\n"),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad \"json\"\n"}}`,
			KindResponse, `null`, "", true},
		{"error response invalid utf8 message", ErrorResponse([]byte(`"a"`), protocol.CodeServerError, "exit \xff"),
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":"exit ` + "\ufffd" + `"}}`,
			KindResponse, `"a"`, "", true},
		{"response", Response([]byte(`"x"`), []byte(`{"tools":[]}`)),
			`{"jsonrpc":"2.0","id":"x","result":{"tools":[]}}`, KindResponse, `"x"`, "", false},
		{"response nil result", Response([]byte(`1`), nil),
			`{"jsonrpc":"2.0","id":1,"result":{}}`, KindResponse, `1`, "", false},
		{"request", Request([]byte(`7`), "tools/call", []byte(`{"name":"t"}`)),
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}`, KindRequest, `7`, "tools/call", false},
		{"request no params", Request([]byte(`"p-1"`), "ping", nil),
			`{"jsonrpc":"2.0","id":"p-1","method":"ping"}`, KindRequest, `"p-1"`, "ping", false},
		{"notification", Notification("notifications/cancelled", []byte(`{"requestId":3}`)),
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`, KindNotification, ``, "notifications/cancelled", false},
		{"notification no params", Notification("notifications/initialized", nil),
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification, ``, "notifications/initialized", false},
		{"append form", AppendNotification([]byte("x"), "m", nil)[1:],
			`{"jsonrpc":"2.0","method":"m"}`, KindNotification, ``, "m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Fatalf("got  %s\nwant %s", tt.got, tt.want)
			}
			if !jsontext.Value(tt.got).IsValid() {
				t.Fatal("not valid JSON")
			}
			m, err := Parse(tt.got)
			if err != nil {
				t.Fatalf("does not parse back: %v", err)
			}
			if m.Kind != tt.kind || string(m.Bytes(m.ID)) != tt.id || m.MethodName() != tt.method || m.IsError != tt.isError {
				t.Errorf("parsed back as kind=%v id=%s method=%q isError=%v", m.Kind, m.Bytes(m.ID), m.MethodName(), m.IsError)
			}
		})
	}
}

func TestAppendErrorResponseNoAllocs(t *testing.T) {
	dst := make([]byte, 0, 256)
	id := []byte(`42`)
	if n := testing.AllocsPerRun(100, func() {
		dst = AppendErrorResponse(dst[:0], id, protocol.CodeServerError, "upstream exited")
	}); n != 0 {
		t.Errorf("AppendErrorResponse allocated %v times", n)
	}
}
