package eras

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// digestOf is requestDigest of s, which must parse.
func digestOf(t testing.TB, s string) [32]byte {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return requestDigest(m.MethodName(), m.Raw)
}

// TestRequestDigest: a retry re-encoding its request (members in another
// order at any depth, other whitespace, other escapes of the same
// strings, other spellings of the same numbers) and adding
// inputResponses, requestState and _meta binds to the same digest; a
// change of method or of any other param does not.
func TestRequestDigest(t *testing.T) {
	first := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"when":"fri","seats":[2,{"a":1,"b":"x"}]},"_meta":{"progressToken":"p"}}}`
	same := []string{
		`{"id":2,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"seats":[2.0,{"b":"\u0078","a":1e0}],"when":"fri"},"name":"book","requestState":"s","inputResponses":{"k":{}}}}`,
		"{ \"jsonrpc\" : \"2.0\" , \"id\" : 3 , \"method\" : \"tools/call\" , \"params\" : { \"_meta\" : { } , \"name\" : \"b\\u006fok\" , \"arguments\" : { \"when\" : \"fri\" , \"seats\" : [ 2 , { \"a\" : 1 , \"b\" : \"x\" } ] } } }",
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"book","arguments":{"when":"fri","seats":[2,{"a":1,"b":"x"}]},"\u005fmeta":{"x":1},"request\u0053tate":"s"}}`,
	}
	other := []string{
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"book","arguments":{"when":"fri","seats":[2,{"a":1,"b":"x"}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"when":"sat","seats":[2,{"a":1,"b":"x"}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"when":"fri","seats":[{"a":1,"b":"x"},2]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"when":"fri","seats":[2,{"a":1,"b":"x"}]},"task":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book"}}`,
	}
	want := digestOf(t, first)
	for _, s := range same {
		if digestOf(t, s) != want {
			t.Errorf("a re-encoding of the request has another digest: %s", s)
		}
	}
	for _, s := range other {
		if digestOf(t, s) == want {
			t.Errorf("another request has the same digest: %s", s)
		}
	}
	// No params and params that are only what a retry adds: the same.
	if digestOf(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`) != digestOf(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"requestState":"s","inputResponses":{}}}`) {
		t.Error("a request without params and its retry have different digests")
	}
}

// FuzzRequestDigest: for any parsed request, the digest does not depend on
// how its params are spelled: the params decoded and encoded again (Go's
// encoding: keys sorted, its own escapes) with a requestState added, bind
// to the same digest.
func FuzzRequestDigest(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add(s)
	}
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"z":[1.5e3,"<&>"],"a":{"y":null,"x":true}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := jsonrpc.Parse([]byte(s))
		if err != nil || m.Kind != jsonrpc.KindRequest {
			return
		}
		d := requestDigest(m.MethodName(), m.Raw)
		var p struct {
			Params map[string]any `json:"params"`
		}
		if json.Unmarshal(m.Raw, &p) != nil {
			return // params not an object: nothing to re-encode
		}
		if params := m.Bytes(find(m.Raw, wholeValue(m.Raw), "params")); params != nil {
			if v := jsontext.Value(bytes.Clone(params)); v.Canonicalize() != nil {
				return // a member named twice: ambiguous, bound to its own spelling
			}
		}
		if !find(m.Raw, wholeValue(m.Raw), "params").Present() && p.Params != nil {
			return // encoding/json folds case: what it read is not the request's params
		}
		if p.Params == nil {
			p.Params = map[string]any{}
		}
		delete(p.Params, "_meta")
		p.Params["requestState"] = "s"
		params, err := json.Marshal(p.Params)
		if err != nil {
			return
		}
		retry, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": m.MethodName(), "params": json.RawMessage(params)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := jsonrpc.Parse(retry)
		if err != nil {
			return
		}
		if requestDigest(r.MethodName(), r.Raw) != d {
			t.Fatalf("the re-encoded retry\n%s\nof\n%s\nhas another digest", retry, s)
		}
	})
}

// BenchmarkRequestDigest: the digest of a tools/call with a 1 KB
// argument, taken when its request is parked and when its retry opens.
func BenchmarkRequestDigest(b *testing.B) {
	m, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` +
		string(bytes.Repeat([]byte("x"), 1<<10)) + `","n":3},"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		requestDigest(m.MethodName(), m.Raw)
	}
}
