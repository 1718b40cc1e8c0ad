package jsonrpc

import (
	"bytes"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestAppendCompact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1,\n  \"method\": \"x\"\n}\n", `{"jsonrpc":"2.0","id":1,"method":"x"}`},
		{"{\"a\": \"keep  spaces\\n and \\\" quotes \"}", `{"a":"keep  spaces\n and \" quotes "}`},
		{"[ 1 ,\r\n\t2 ]", `[1,2]`},
		{`{"a":"\\"}`, `{"a":"\\"}`},
		{`{}`, `{}`},
	} {
		if got := string(AppendCompact(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("AppendCompact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzAppendCompact(f *testing.F) {
	f.Add([]byte("{\n \"id\": \"a b\",\n \"x\": [1, 2.5e3, true, null]\n}"))
	f.Add([]byte(`{"s":"tab\there \\\" done"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := AppendCompact(nil, b)
		want := jsontext.Value(bytes.Clone(b))
		if err := want.Compact(); err != nil {
			return // invalid JSON: only the valid case has a contract
		}
		if bytes.IndexByte(got, '\n') >= 0 {
			t.Fatalf("newline left in %q", got)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendCompact(%q) = %q, jsontext says %q", b, got, want)
		}
	})
}
