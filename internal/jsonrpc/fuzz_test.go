package jsonrpc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// lax is the JSON Parse and SplitBatch accept: anything jsontext accepts
// except that duplicate names are allowed (Parse rejects them only in the
// objects it reads; see FuzzParseAgreesWithReference).
func lax(b []byte) bool { return jsontext.Value(b).IsValid(jsontext.AllowDuplicateNames(true)) }

var fuzzSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":"a\u0062","method":"tools/call","params":{"_meta":{"progressToken":7},"arguments":{"x":[1,2,{"y":null}]}}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r","reason":"t"}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":12345678901234567890123,"result":{}}`,
	`{"\u006asonrpc":"2.0","id":-0,"method":"m"}`,
	`{"jsonrpc":"2.0","id":1,"id":2}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":1,"a":2}}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1e3,"total":-0.5E-2}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\ud83d\ude00 \u00e9 \\ \" \/ é"}]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"t":"\ud800"}}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"\x01\"}}",
	`[{"jsonrpc":"2.0","method":"m"}]`,
	`{"jsonrpc":"2.0","method":"m"} x`,
	"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
	``, `{`, `[]`, `null`,
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		m, err := Parse(b)
		if !bytes.Equal(b, orig) {
			t.Fatal("Parse modified its input")
		}
		if err != nil {
			if errors.Is(err, ErrParse) == errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v wraps neither or both sentinels", err)
			}
			if errors.Is(err, ErrInvalidRequest) && !lax(b) {
				t.Fatalf("invalid JSON reported as invalid request: %v", err)
			}
			return
		}
		if !lax(b) {
			t.Fatal("Parse accepted invalid JSON")
		}
		for _, s := range []Span{m.ID, m.Method, m.ProgressToken, m.CancelRequestID, m.Task, m.Params, m.Meta} {
			if s.Present() && (s.Start < 0 || s.Start >= s.End || s.End > len(b)) {
				t.Fatalf("span %+v out of bounds for %d bytes", s, len(b))
			}
			if s.Present() && !jsontext.Value(m.Bytes(s)).IsValid(jsontext.AllowDuplicateNames(true)) { // inside forwarded values duplicates pass
				t.Fatalf("span %+v is not a JSON value: %q", s, m.Bytes(s))
			}
		}
		if m.Kind < KindRequest || m.Kind > KindResponse {
			t.Fatalf("Kind = %v", m.Kind)
		}
		if (m.Kind == KindNotification) == m.ID.Present() {
			t.Fatalf("kind %v with ID present = %v", m.Kind, m.ID.Present())
		}
		if !m.ID.Present() {
			return
		}
		out := Splice(nil, b, Edit{m.ID, []byte(`"x"`)})
		m2, err := Parse(out)
		if err != nil {
			t.Fatalf("spliced message does not parse: %v\n%s", err, out)
		}
		if m2.Kind != m.Kind || m2.MethodName() != m.MethodName() || m2.IsError != m.IsError {
			t.Fatalf("splice changed the message: %+v vs %+v", m2, m)
		}
		if got := string(m2.Bytes(m2.ID)); got != `"x"` {
			t.Fatalf("spliced ID = %s", got)
		}
	})
}

func FuzzSplitBatch(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`[1,[2,[3]],{"a":{"b":[]}}," ]"]`))
	f.Add([]byte(` [ {} , {} ] `))
	f.Fuzz(func(t *testing.T, b []byte) {
		elems, err := SplitBatch(b)
		if err != nil {
			if errors.Is(err, ErrParse) == errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v wraps neither or both sentinels", err)
			}
			return
		}
		if !lax(b) || !IsBatch(b) {
			t.Fatal("SplitBatch accepted something that is not a valid JSON array")
		}
		if len(elems) == 0 {
			t.Fatal("no elements and no error")
		}
		// The elements, rejoined, must make up the same array.
		var joined []byte
		joined = append(joined, '[')
		for i, e := range elems {
			if !lax(e) {
				t.Fatalf("element %d invalid: %q", i, e)
			}
			if i > 0 {
				joined = append(joined, ',')
			}
			joined = append(joined, e...)
		}
		joined = append(joined, ']')
		want := jsontext.Value(bytes.Clone(b))
		if err := want.Compact(jsontext.AllowDuplicateNames(true)); err != nil {
			t.Fatal(err)
		}
		got := jsontext.Value(joined)
		if err := got.Compact(jsontext.AllowDuplicateNames(true)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("elements rejoin to %s, want %s", got, want)
		}
	})
}
