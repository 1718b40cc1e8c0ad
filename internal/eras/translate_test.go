package eras

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

func TestToSessionEra(t *testing.T) {
	const pv, caps, info = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`,
		`"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}`, `"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}`
	tests := []struct{ name, in, want string }{
		{"keeps progressToken and other keys",
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p",` + pv + `,` + caps + `,"traceparent":"00-a"},"arguments":{}}}`,
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p","traceparent":"00-a"},"arguments":{}}}`},
		{"reserved keys first",
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{` + pv + `,` + caps + `,"progressToken":1}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":1}}}`},
		{"reserved keys last",
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":1,` + pv + `,` + caps + `}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":1}}}`},
		{"two runs",
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{` + pv + `,"a":1,` + caps + `,` + info + `,"b":2,"io.modelcontextprotocol/logLevel":"info"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"a":1,"b":2}}}`},
		{"_meta emptied and first",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + pv + `,` + caps + `},"name":"x"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`},
		{"_meta emptied and last",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{` + pv + `,` + caps + `}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`},
		{"_meta emptied and alone",
			`{"jsonrpc":"2.0","id":"a\u0062","method":"tools/list","params":{"_meta":{` + pv + `,` + caps + `}}}`,
			`{"jsonrpc":"2.0","id":"a\u0062","method":"tools/list","params":{}}`},
		{"whitespace and key order kept",
			"{\n  \"params\" : {\n    \"cursor\" : \"c\" ,\n    \"_meta\" : {\n      \"progressToken\" : 1.50 ,\n      " + pv + " ,\n      " + caps + "\n    }\n  } ,\n  \"id\" : 1e0 ,\n  \"method\" : \"tools/list\" ,\n  \"jsonrpc\" : \"2.0\"\n}\n",
			"{\n  \"params\" : {\n    \"cursor\" : \"c\" ,\n    \"_meta\" : {\n      \"progressToken\" : 1.50\n    }\n  } ,\n  \"id\" : 1e0 ,\n  \"method\" : \"tools/list\" ,\n  \"jsonrpc\" : \"2.0\"\n}\n"},
		{"whitespace when _meta goes",
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{ \"a\" : 1 , \"_meta\" : { " + pv + " } }}",
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{ \"a\" : 1 }}"},
		{"escaped reserved keys",
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"\u005fmeta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28","io.modelcontextprotocol\u002fclientCapabilities":{},"\u0069o.modelcontextprotocol/x":1,"k":2}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"\u005fmeta":{"k":2}}}`},
		{"keys that only look reserved stay",
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocolx/y":1,"dev.mcp/x":2,"io.modelcontextprotocol":3,"IO.modelcontextprotocol/x":4},"io.modelcontextprotocol/protocolVersion":"v"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocolx/y":1,"dev.mcp/x":2,"io.modelcontextprotocol":3,"IO.modelcontextprotocol/x":4},"io.modelcontextprotocol/protocolVersion":"v"}}`},
		{"reserved keys nested deeper stay",
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"arguments":{"_meta":{` + pv + `}},"_meta":{"x":{` + pv + `}}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"arguments":{"_meta":{` + pv + `}},"_meta":{"x":{` + pv + `}}}}`},
		{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}`, `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}`},
		{"_meta not an object", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":null}}`, `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":null}}`},
		{"_meta empty", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{}}}`, `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{}}}`},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"m"}`, `{"jsonrpc":"2.0","id":1,"method":"m"}`},
		{"params array", `{"jsonrpc":"2.0","id":1,"method":"m","params":[{"_meta":{` + pv + `}}]}`, `{"jsonrpc":"2.0","id":1,"method":"m","params":[{"_meta":{` + pv + `}}]}`},
		{"notification",
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345678901234567890,"_meta":{` + pv + `}}}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345678901234567890}}`},
		{"strings holding braces and quotes",
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"a":"}\",{",` + pv + `,"b":"\\"},"c":"{"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"a":"}\",{","b":"\\"},"c":"{"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := parse(t, tt.in)
			got := string(ToSessionEra([]byte("prefix"), m))
			if got != "prefix"+tt.want {
				t.Fatalf("got  %s\nwant prefix%s", got, tt.want)
			}
			if string(m.Raw) != tt.in {
				t.Fatal("input modified")
			}
		})
	}
}

func TestFromSessionEra(t *testing.T) {
	const complete, cache = `"resultType":"complete",`, `"resultType":"complete","ttlMs":0,"cacheScope":"private",`
	tests := []struct{ name, method, in, want string }{
		{"cacheable list", "tools/list",
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"t"}],"nextCursor":"c"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{` + cache + `"tools":[{"name":"t"}],"nextCursor":"c"}}`},
		{"each cacheable method", "resources/templates/list",
			`{"jsonrpc":"2.0","id":1,"result":{"resourceTemplates":[]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{` + cache + `"resourceTemplates":[]}}`},
		{"resources/read", "resources/read",
			`{"jsonrpc":"2.0","id":1,"result":{"contents":[]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{` + cache + `"contents":[]}}`},
		{"not cacheable", "tools/call",
			`{"jsonrpc":"2.0","id":"x","result":{"content":[],"isError":false}}`,
			`{"jsonrpc":"2.0","id":"x","result":{` + complete + `"content":[],"isError":false}}`},
		{"empty result", "completion/complete", `{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}`},
		{"empty cacheable result with space", "prompts/list", `{"jsonrpc":"2.0","id":1,"result":{ }}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","ttlMs":0,"cacheScope":"private" }}`},
		{"untyped multi round-trip result", "tools/call",
			`{"jsonrpc":"2.0","id":1,"result":{"content":[],"inputRequests":{"k":{"method":"roots/list"}},"requestState":"r=2"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","content":[],"inputRequests":{"k":{"method":"roots/list"}},"requestState":"r=2"}}`},
		{"requestState alone on prompts/get", "prompts/get",
			`{"jsonrpc":"2.0","id":1,"result":{"requestState":"s"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"s"}}`},
		{"inputRequests on a method that cannot take input", "tools/list",
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"inputRequests":{}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{` + cache + `"tools":[],"inputRequests":{}}}`},
		{"resultType kept", "tools/call",
			`{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"input_required"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"input_required"}}`},
		{"only the missing cache members", "resources/list",
			`{"jsonrpc":"2.0","id":1,"result":{"resources":[],"ttlMs":5000}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","cacheScope":"private","resources":[],"ttlMs":5000}}`},
		{"all present", "resources/list",
			`{"jsonrpc":"2.0","id":1,"result":{"cacheScope":"public","resources":[],"ttlMs":5000,"resultType":"complete"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"cacheScope":"public","resources":[],"ttlMs":5000,"resultType":"complete"}}`},
		{"escaped keys count", "tools/list",
			`{"jsonrpc":"2.0","id":1,"result":{"result\u0054ype":"complete","ttl\u004ds":1,"cacheScope":"public","tools":[]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"result\u0054ype":"complete","ttl\u004ds":1,"cacheScope":"public","tools":[]}}`},
		{"nested resultType does not count", "tools/call",
			`{"jsonrpc":"2.0","id":1,"result":{"content":[{"resultType":"x","type":"text","text":"{\"resultType\":1}"}]}}`,
			`{"jsonrpc":"2.0","id":1,"result":{` + complete + `"content":[{"resultType":"x","type":"text","text":"{\"resultType\":1}"}]}}`},
		{"whitespace, order and id kept", "tools/list",
			"{ \"result\" :\n\t{ \"tools\" : [ ] } , \"id\" : 12345678901234567890.0e-0 , \"jsonrpc\" : \"2.0\" }\n",
			"{ \"result\" :\n\t{" + cache + " \"tools\" : [ ] } , \"id\" : 12345678901234567890.0e-0 , \"jsonrpc\" : \"2.0\" }\n"},
		{"result an array", "tools/list", `{"jsonrpc":"2.0","id":1,"result":[1,2]}`, `{"jsonrpc":"2.0","id":1,"result":[1,2]}`},
		{"result null", "tools/list", `{"jsonrpc":"2.0","id":1,"result":null}`, `{"jsonrpc":"2.0","id":1,"result":null}`},
		{"result a string", "tools/call", `{"jsonrpc":"2.0","id":1,"result":"{}"}`, `{"jsonrpc":"2.0","id":1,"result":"{}"}`},
		{"resource not found", "resources/read",
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"Resource not found","data":{"uri":"file:///x"}}}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Resource not found","data":{"uri":"file:///x"}}}`},
		{"resource not found written oddly", "resources/read",
			`{"jsonrpc":"2.0","id":5,"error":{"message":"gone","code" : -3.2002e4 }}`,
			`{"jsonrpc":"2.0","id":5,"error":{"message":"gone","code" : -32602 }}`},
		{"-32002 elsewhere kept", "tools/call",
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"m"}}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"m"}}`},
		{"other error kept", "resources/read",
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"m","data":{"code":-32002}}}`,
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"m","data":{"code":-32002}}}`},
		{"error with null id", "resources/read",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"m"}}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"m"}}`},
		{"not a response", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"roots/list"}`, `{"jsonrpc":"2.0","id":1,"method":"roots/list"}`},
		{"not JSON", "tools/list", `{"jsonrpc":"2.0","id":1,"result":{`, `{"jsonrpc":"2.0","id":1,"result":{`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			got := string(FromSessionEra([]byte("prefix"), tt.method, in))
			if got != "prefix"+tt.want {
				t.Fatalf("got  %s\nwant prefix%s", got, tt.want)
			}
			if string(in) != tt.in {
				t.Fatal("input modified")
			}
		})
	}
}

// TestHotPathsDoNotAllocate covers what runs on every modern request: with
// room in dst, no allocation at all.
func TestHotPathsDoNotAllocate(t *testing.T) {
	m := parse(t, req("tools/call", `{"name":"get_weather","arguments":{},"_meta":`+meta(`,"progressToken":1,"io.modelcontextprotocol/logLevel":"info"`)+`}`))
	h := std("tools/call", "get_weather")
	reply := []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
	buf := make([]byte, 0, 4096)
	for name, f := range map[string]func(){
		"IsModern":       func() { IsModern(protocol.StatelessVersion, m) },
		"Check":          func() { Check(h, m) },
		"ToSessionEra":   func() { ToSessionEra(buf[:0], m) },
		"FromSessionEra": func() { FromSessionEra(buf[:0], "tools/list", reply) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

func TestErrorCode(t *testing.T) {
	for raw, want := range map[string]int{
		`{"jsonrpc":"2.0","id":1,"error":{"message":"x","code":-32601}}`: -32601,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}`: -32602,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}}`:    0,
		`{"jsonrpc":"2.0","id":1,"result":{"code":-32601}}`:              0,
	} {
		m, err := jsonrpc.Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := ErrorCode(&m); got != want {
			t.Errorf("ErrorCode(%s) = %d, want %d", raw, got, want)
		}
	}
}
