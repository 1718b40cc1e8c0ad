package eras

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

func FuzzDecodeHeaderValue(f *testing.F) {
	for _, s := range []string{"", "plain", "=?base64?SGVsbG8sIOS4lueVjA==?=", "=?base64?IHBhZGRlZCA=?=",
		"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?=", "=?base64?=", "=?base64??=", " x\t", "\xff", "=?base64?/w==?="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := DecodeHeaderValue(s)
		inner, sentinel := strings.CutPrefix(s, b64Prefix)
		sentinel = sentinel && strings.HasSuffix(inner, b64Suffix)
		if err == nil && !sentinel && d != s {
			t.Fatalf("plain %q decoded to %q", s, d)
		}
		if err == nil && sentinel && !utf8.ValidString(d) {
			t.Fatalf("%q decoded to invalid UTF-8", s)
		}
		for _, v := range []string{s, d} {
			if !utf8.ValidString(v) {
				continue
			}
			e := EncodeHeaderValue(v)
			for i := 0; i < len(e); i++ {
				if c := e[i]; (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' {
					t.Fatalf("EncodeHeaderValue(%q) = %q: byte %#x is not header-safe", v, e, c)
				}
			}
			if e != "" && (isBlank(e[0]) || isBlank(e[len(e)-1])) {
				t.Fatalf("EncodeHeaderValue(%q) = %q: leading or trailing blank", v, e)
			}
			if back, err := DecodeHeaderValue(e); err != nil || back != v {
				t.Fatalf("DecodeHeaderValue(EncodeHeaderValue(%q)) = %q, %v", v, back, err)
			}
		}
	})
}

var messageSeeds = []string{
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"arguments":{}}}`,
	`{"jsonrpc":"2.0","id":"a\u0062","method":"tools/list","params":{"\u005fmeta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}`,
	"{ \"params\" : { \"_meta\" : { \"a\" : [ 1 , { } ] , \"io.modelcontextprotocol/x\" : \"}\" } } , \"id\" : 1e0 , \"method\" : \"m\" , \"jsonrpc\" : \"2.0\" }",
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":{"io.modelcontextprotocol/logLevel":"info","x":null}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"ttlMs":1}}`,
	`{"jsonrpc":"2.0","id":12345678901234567890,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":[]}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"m","data":{"code":-32002}}}`,
	`{"jsonrpc":"2.0","id":"r","result":{"result\u0054ype":"complete","a":{"resultType":1}}}`,
}

// decode reads b as generic JSON, numbers kept as written.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// sameEnvelope checks what every translation must keep: valid JSON, a
// message of the same kind, the id byte for byte.
func sameEnvelope(t *testing.T, in *jsonrpc.Message, out []byte) *jsonrpc.Message {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("invalid JSON from %s:\n%s", in.Raw, out)
	}
	m, err := jsonrpc.Parse(out)
	if err != nil {
		t.Fatalf("%v from %s:\n%s", err, in.Raw, out)
	}
	if m.Kind != in.Kind || !bytes.Equal(m.Bytes(m.ID), in.Bytes(in.ID)) || !bytes.Equal(m.Bytes(m.Method), in.Bytes(in.Method)) {
		t.Fatalf("envelope changed from %s:\n%s", in.Raw, out)
	}
	return &m
}

func FuzzToSessionEra(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := jsonrpc.Parse(b)
		if err != nil {
			return
		}
		orig := bytes.Clone(b)
		out := ToSessionEra(nil, &in)
		if !bytes.Equal(b, orig) {
			t.Fatal("input modified")
		}
		sameEnvelope(t, &in, out)

		// Same value as the input with the reserved _meta keys removed.
		want := decode(t, b)
		if params, ok := want["params"].(map[string]any); ok {
			if meta, ok := params["_meta"].(map[string]any); ok {
				n := len(meta)
				for k := range meta {
					if strings.HasPrefix(k, protocol.MetaPrefix) {
						delete(meta, k)
					}
				}
				if len(meta) == 0 && n > 0 {
					delete(params, "_meta")
				}
			}
		}
		if got := decode(t, out); !reflect.DeepEqual(got, want) {
			t.Fatalf("ToSessionEra(%s) = %s\ngot  %v\nwant %v", b, out, got, want)
		}
	})
}

func FuzzFromSessionEra(f *testing.F) {
	for _, s := range messageSeeds {
		for _, m := range []string{"tools/list", "resources/read", "tools/call"} {
			f.Add(m, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, method string, b []byte) {
		orig := bytes.Clone(b)
		out := FromSessionEra(nil, method, b)
		if !bytes.Equal(b, orig) {
			t.Fatal("input modified")
		}
		in, err := jsonrpc.Parse(b)
		if err != nil || in.Kind != jsonrpc.KindResponse {
			if !bytes.Equal(out, b) {
				t.Fatalf("FromSessionEra changed what it cannot read: %s", out)
			}
			return
		}
		sameEnvelope(t, &in, out)

		got, want := decode(t, out), decode(t, b)
		if res, ok := want["result"].(map[string]any); ok {
			add := map[string]any{"resultType": "complete"}
			if protocol.IsCacheable(method) {
				add["ttlMs"], add["cacheScope"] = json.Number("0"), "private"
			}
			for k, v := range add {
				if _, ok := res[k]; !ok {
					res[k] = v
				}
			}
		}
		if e, ok := want["error"].(map[string]any); ok && method == "resources/read" {
			if c, ok := e["code"].(json.Number); ok && numberIs([]byte(c), -32002) {
				e["code"] = json.Number("-32602")
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("FromSessionEra(%q, %s) = %s\ngot  %v\nwant %v", method, b, out, got, want)
		}
	})
}

// FuzzCheck feeds Check any valid message and headers: it must not panic,
// must refuse only with the statuses and codes it documents, and its error
// response must be valid JSON carrying the message's id.
func FuzzCheck(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add([]byte(s), protocol.StatelessVersion, "tools/call", "x")
	}
	f.Add([]byte(req("tools/call", `{"name":"x","_meta":`+meta("")+`}`)), "2025-11-25, 2025-11-25", "tools/call", "x")
	f.Add([]byte(req("tools/call", `{"name":"Hello, 世界","_meta":`+meta("")+`}`)), protocol.StatelessVersion, "tools/call", "=?base64?SGVsbG8sIOS4lueVjA==?=")
	f.Add([]byte(req("server/discover", `{"_meta":{"`+protocol.MetaProtocolVersion+`":"v9","`+protocol.MetaClientCapabilities+`":{}}}`)), "v9", "server/discover", "")
	f.Fuzz(func(t *testing.T, b []byte, version, method, name string) {
		m, err := jsonrpc.Parse(b)
		if err != nil {
			return
		}
		IsModern(version, &m)
		h := hdr(HeaderProtocolVersion, version, HeaderMethod, method, HeaderName, name)
		got, p := Check(h, &m)
		if p == nil {
			hv, _, _ := HeaderVersion(h)
			headerOK := hv == got.Version || got.OlderHeader == hv && slices.Contains(protocol.SessionVersions, hv)
			if m.Kind == jsonrpc.KindRequest && (!headerOK || !slices.Contains(protocol.StatelessVersions, got.Version) ||
				got.Method != method || !json.Valid(got.Capabilities)) {
				t.Fatalf("accepted %s under %q with %+v", b, version, got)
			}
			return
		}
		switch {
		case p.Status == 400 && slices.Contains([]int{-32600, -32602, protocol.CodeHeaderMismatch, protocol.CodeUnsupportedVersion}, p.Code):
		case p.Status == 404 && p.Code == -32601:
		default:
			t.Fatalf("unexpected refusal %v", p)
		}
		resp := p.AppendResponse(nil, m.Bytes(m.ID))
		r, err := jsonrpc.Parse(resp)
		if err != nil || !json.Valid(resp) || !r.IsError || m.ID.Present() && !bytes.Equal(r.Bytes(r.ID), m.Bytes(m.ID)) {
			t.Fatalf("bad error response %s: %v", resp, err)
		}
	})
}

// FuzzHeaderVersion: HeaderVersion never panics; what it accepts is one
// version that every non-empty element of every line equals, trimmed.
func FuzzHeaderVersion(f *testing.F) {
	for _, seed := range [][2]string{{"2025-11-25", ""}, {"2025-11-25, 2025-11-25", ""}, {"2025-11-25", "2025-11-25"},
		{"2025-11-25,2026-07-28", ""}, {" , ,", "\t2025-06-18 "}, {"", ""}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		h := hdr(HeaderProtocolVersion, a, HeaderProtocolVersion, b)
		v, repeated, ok := HeaderVersion(h)
		var elems []string
		for _, line := range []string{a, b} {
			for _, e := range strings.Split(line, ",") {
				if e = strings.Trim(e, " \t"); e != "" {
					elems = append(elems, e)
				}
			}
		}
		distinct := len(elems) > 0 && slices.ContainsFunc(elems, func(e string) bool { return e != elems[0] })
		switch {
		case distinct:
			if ok {
				t.Fatalf("%q, %q: accepted %q though its values differ", a, b, v)
			}
		case !ok:
			t.Fatalf("%q, %q: refused one value", a, b)
		case len(elems) == 0 && (v != "" || repeated):
			t.Fatalf("%q, %q: %q from no value", a, b, v)
		case len(elems) > 0 && (v != elems[0] || repeated != (len(elems) > 1)):
			t.Fatalf("%q, %q: got %q repeated=%v", a, b, v, repeated)
		}
	})
}
