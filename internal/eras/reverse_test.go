package eras

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

func TestInitializeResult(t *testing.T) {
	for _, tc := range []struct {
		name, discover, want string
	}{
		{
			name:     "serverInfo in _meta",
			discover: `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"instructions":"use <x> & y","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}`,
			want:     `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"},"instructions":"use <x> & y"}`,
		},
		{
			name:     "top-level serverInfo",
			discover: `{"capabilities":{},"serverInfo":{"name":"t","version":"2"}}`,
			want:     `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"t","version":"2"}}`,
		},
		{
			name:     "no serverInfo, instructions not a string",
			discover: `{"capabilities":{},"instructions":5}`,
			want:     `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"unknown (a 2026-07-28 server)","version":"0"}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := InitializeResult([]byte(tc.discover), "2025-11-25")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	for _, bad := range []string{`[]`, `{}`, `{"capabilities":[]}`, `{"capabilities":null}`, `nope`} {
		if _, err := InitializeResult([]byte(bad), "2025-11-25"); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestBridgeRequest(t *testing.T) {
	meta := map[string]json.RawMessage{
		protocol.MetaProtocolVersion:    json.RawMessage(`"2026-07-28"`),
		protocol.MetaClientCapabilities: json.RawMessage(`{"sampling":{}}`),
	}
	for _, tc := range []struct {
		name, in, want string
		params         map[string]json.RawMessage
	}{
		{
			name: "no params",
			in:   `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			want: `{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		},
		{
			name: "client meta kept, its revision keys replaced",
			in:   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a<b","arguments":{"n":1.50},"_meta":{"progressToken":7,"io.modelcontextprotocol/logLevel":"debug","io.modelcontextprotocol/protocolVersion":"1999"}}}`,
			want: `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7},"arguments":{"n":1.50},"name":"a<b"}}`,
		},
		{
			name:   "retry members",
			in:     `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":null}}`,
			params: map[string]json.RawMessage{"requestState": json.RawMessage(`"s"`), "inputResponses": json.RawMessage(`{"k":{"action":"accept"}}`)},
			want:   `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"inputResponses":{"k":{"action":"accept"}},"name":"a","requestState":"s"}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := jsonrpc.Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := BridgeRequest(&msg, []byte(`"x"`), meta, tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":[]}}`,
		`{"jsonrpc":"2.0","method":"m"}`,
	} {
		msg, err := jsonrpc.Parse([]byte(bad))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := BridgeRequest(&msg, []byte(`1`), meta, nil); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestParseInputRequired(t *testing.T) {
	ir, ok, err := ParseInputRequired([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required",` +
		`"inputRequests":{"b":{"method":"roots/list"},"a":{"method":"elicitation/create","params":{"message":"m"}}},"requestState":"st"}}`))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if len(ir.Requests) != 2 || ir.Requests[0].Key != "a" || ir.Requests[0].Method != "elicitation/create" ||
		string(ir.Requests[0].Params) != `{"message":"m"}` || ir.Requests[1].Key != "b" || ir.Requests[1].Params != nil ||
		string(ir.State) != `"st"` {
		t.Errorf("%+v", ir)
	}
	for _, plain := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"input_required"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"input_required"}}`,
	} {
		if _, ok, err := ParseInputRequired([]byte(plain)); ok || err != nil {
			t.Errorf("%s: %v %v", plain, ok, err)
		}
	}
	for _, bad := range []string{
		`{"result":{"resultType":"input_required"}}`,
		`{"result":{"resultType":"input_required","requestState":5}}`,
		`{"result":{"resultType":"input_required","inputRequests":{"a":{"method":"tools/call"}}}}`,
		`{"result":{"resultType":"input_required","inputRequests":{"a":[]}}}`,
		`{"result":{"resultType":"input_required","inputRequests":{` + strings.Repeat(`"k`, 0) + manyRequests(33) + `}}}`,
	} {
		if _, ok, err := ParseInputRequired([]byte(bad)); !ok || err == nil {
			t.Errorf("%s: %v %v", bad, ok, err)
		}
	}
}

func manyRequests(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":{"method":"roots/list"}`)
	}
	return b.String()
}

// FuzzBridgeRequest: whatever request a client sends, the bridged request
// parses, keeps the method, has the gateway's id and the gateway's
// protocol version in _meta, or is refused with an error.
func FuzzBridgeRequest(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":1}}}`)
	f.Add(`{"jsonrpc":"2.0","id":"z","method":"x","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1"}}}`)
	f.Add(`{"jsonrpc":"2.0","id":2,"method":"y"}`)
	meta := map[string]json.RawMessage{protocol.MetaProtocolVersion: json.RawMessage(`"2026-07-28"`)}
	f.Fuzz(func(t *testing.T, in string) {
		msg, err := jsonrpc.Parse([]byte(in))
		if err != nil || msg.Kind != jsonrpc.KindRequest {
			return
		}
		out, err := BridgeRequest(&msg, []byte(`"gw"`), meta, map[string]json.RawMessage{"requestState": json.RawMessage(`"s"`)})
		if err != nil {
			return
		}
		got, err := jsonrpc.Parse(out)
		if err != nil {
			t.Fatalf("%s -> unparsable %s: %v", in, out, err)
		}
		if got.MethodName() != msg.MethodName() || string(got.Bytes(got.ID)) != `"gw"` {
			t.Fatalf("%s -> %s", in, out)
		}
		var p struct {
			Params struct {
				Meta         map[string]json.RawMessage `json:"_meta"`
				RequestState string                     `json:"requestState"`
			} `json:"params"`
		}
		if err := json.Unmarshal(out, &p); err != nil || string(p.Params.Meta[protocol.MetaProtocolVersion]) != `"2026-07-28"` || p.Params.RequestState != "s" {
			t.Fatalf("%s -> %s (%v)", in, out, err)
		}
	})
}

// FuzzParseInputRequired: no input panics; a result reported as
// input_required without an error has only allowed methods, and its
// state, if any, is a JSON string.
func FuzzParseInputRequired(f *testing.F) {
	f.Add(`{"result":{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}}`)
	f.Add(`{"result":{"resultType":"input_required","requestState":null}}`)
	f.Fuzz(func(t *testing.T, in string) {
		ir, ok, err := ParseInputRequired([]byte(in))
		if !ok || err != nil {
			return
		}
		if len(ir.Requests) == 0 && ir.State == nil {
			t.Fatal("neither requests nor state")
		}
		for _, r := range ir.Requests {
			if !protocol.IsServerRequest(r.Method) {
				t.Fatalf("method %q", r.Method)
			}
		}
		var s string
		if ir.State != nil && json.Unmarshal(ir.State, &s) != nil {
			t.Fatalf("state %s", ir.State)
		}
	})
}

// FuzzInitializeResult: any discover result gives an error or an
// initialize result with the version, a capabilities object and a
// serverInfo object.
func FuzzInitializeResult(f *testing.F) {
	f.Add(`{"capabilities":{},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}}}`)
	f.Add(`{"capabilities":{"tools":{}},"serverInfo":7,"instructions":"i"}`)
	f.Fuzz(func(t *testing.T, in string) {
		out, err := InitializeResult([]byte(in), "2025-11-25")
		if err != nil {
			return
		}
		var r struct {
			ProtocolVersion string                     `json:"protocolVersion"`
			Capabilities    map[string]json.RawMessage `json:"capabilities"`
			ServerInfo      map[string]json.RawMessage `json:"serverInfo"`
		}
		if err := json.Unmarshal(out, &r); err != nil || r.ProtocolVersion != "2025-11-25" || r.Capabilities == nil || r.ServerInfo == nil {
			t.Fatalf("%s -> %s (%v)", in, out, err)
		}
	})
}

func TestInputKey(t *testing.T) {
	for _, tc := range []struct{ params, want string }{
		{``, `{"_meta":{"io.mcpgate/inputKey":"user_name"}}`},
		{`{"message":"m"}`, `{"_meta":{"io.mcpgate/inputKey":"user_name"},"message":"m"}`},
		{`{"_meta":{"progressToken":1},"message":"<&>"}`, `{"_meta":{"io.mcpgate/inputKey":"user_name","progressToken":1},"message":"<&>"}`},
		{`[1]`, `[1]`},
		{`{"_meta":5}`, `{"_meta":5}`},
	} {
		got := WithInputKey(json.RawMessage(tc.params), "user_name")
		if string(got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.params, got, tc.want)
		}
		msg, err := jsonrpc.Parse(jsonrpc.Request([]byte(`"a"`), "elicitation/create", got))
		if err != nil {
			t.Fatal(err)
		}
		if k := InputKey(&msg); (k == "user_name") != (tc.want != tc.params) {
			t.Errorf("%s: InputKey %q", tc.params, k)
		}
	}
}
