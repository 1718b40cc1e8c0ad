package front

import (
	"bytes"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

const testTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestWithTraceMeta(t *testing.T) {
	for _, tc := range []struct {
		name, in, ts, want string
	}{
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "",
			`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"traceparent":"` + testTP + `"}}}`},
		{"empty params", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}`, "",
			`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"traceparent":"` + testTP + `"}}}`},
		{"params without _meta", `{"jsonrpc":"2.0","id":12345678901234567890123,"method":"tools/call","params":{"name":"x"}}`, "a=1",
			`{"jsonrpc":"2.0","id":12345678901234567890123,"method":"tools/call","params":{"_meta":{"traceparent":"` + testTP + `","tracestate":"a=1"},"name":"x"}}`},
		{"null _meta", `{"jsonrpc":"2.0","id":"a","method":"m","params":{"_meta":null}}`, "",
			`{"jsonrpc":"2.0","id":"a","method":"m","params":{"_meta":{"traceparent":"` + testTP + `"}}}`},
		{"client's replaced, others kept", `{"jsonrpc":"2.0","id":1.0,"method":"m","params":{"_meta": {"progressToken" : 7, "traceparent":"00-x","tracestate":"b=2","x\u0079":[1, 2]},"a":1}}`, "",
			`{"jsonrpc":"2.0","id":1.0,"method":"m","params":{"_meta": {"traceparent":"` + testTP + `","progressToken":7,"x\u0079":[1, 2]},"a":1}}`},
		{"padded", " {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\n", "",
			" {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"_meta\":{\"traceparent\":\"" + testTP + "\"}}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := jsonrpc.Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			tm := readTraceMeta(&msg)
			if !tm.ok {
				t.Fatal("not ok")
			}
			got := withTraceMeta(&msg, tm, testTP, tc.ts)
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			back, err := jsonrpc.Parse(got)
			if err != nil {
				t.Fatal(err)
			}
			if tm2 := readTraceMeta(&back); tm2.traceparent != testTP || tm2.tracestate != tc.ts {
				t.Fatalf("read back %+v", tm2)
			}
		})
	}
}

func TestReadTraceMeta(t *testing.T) {
	for _, tc := range []struct {
		in      string
		ok      bool
		tp, ver string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"t","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, true, "t", "2026-07-28"},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":5}}}`, true, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":[]}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{},"_meta":{}}}`, false, "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"a","traceparent":"b"}}}`, false, "", ""},
	} {
		msg, err := jsonrpc.Parse([]byte(tc.in))
		if err != nil {
			continue // the envelope refuses it first: nothing to trace
		}
		tm := readTraceMeta(&msg)
		if tm.ok != tc.ok || tm.ok && (tm.traceparent != tc.tp || tm.version != tc.ver) {
			t.Errorf("%s: got %+v", tc.in, tm)
		}
	}
}

// FuzzWithTraceMeta: whatever a request looks like, the trace context is
// either left out (not ok) or set so that it reads back, with the id and
// method unchanged.
func FuzzWithTraceMeta(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"a":1}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"m"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"m","params":{"x":{"_meta":1},"_meta":null}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		msg, err := jsonrpc.Parse(raw)
		if err != nil || msg.Kind != jsonrpc.KindRequest {
			return
		}
		tm := readTraceMeta(&msg)
		if !tm.ok {
			return
		}
		out := withTraceMeta(&msg, tm, testTP, "k=v")
		back, err := jsonrpc.Parse(out)
		if err != nil {
			t.Fatalf("%s -> %s: %v", raw, out, err)
		}
		if !bytes.Equal(back.Bytes(back.ID), msg.Bytes(msg.ID)) || back.MethodName() != msg.MethodName() {
			t.Fatalf("%s -> %s: id or method changed", raw, out)
		}
		if tm2 := readTraceMeta(&back); !tm2.ok || tm2.traceparent != testTP || tm2.tracestate != "k=v" {
			t.Fatalf("%s -> %s: read back %+v", raw, out, tm2)
		}
	})
}
