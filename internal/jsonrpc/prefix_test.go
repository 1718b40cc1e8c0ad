package jsonrpc

import (
	"strings"
	"testing"
)

// PrefixID reads only the envelope's numeric id, and only when the prefix
// shows it whole.
func TestPrefixID(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		id     string // "" for none
	}{
		{`{"jsonrpc":"2.0","id":12,"result":{"x":"`, "12"},
		{`{"id" : 7 ,"result":`, "7"},
		{`{"jsonrpc":"2.0","result":{"id":3,"x":"`, ""},
		{`{"jsonrpc":"2.0","result":[{"id":3}],"id":4,"x`, "4"},
		{`{"result":"{\"id\":3}","id":5,`, "5"},
		{`{"result":"a\\","id":6,`, "6"},
		{`{"jsonrpc":"2.0","id":12`, ""}, // may be 123...
		{`{"jsonrpc":"2.0","id":"s","result"`, ""},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":{"id":9}`, ""},
		{`{"x":"unterminated "id":5,`, ""},
		{`[{"id":5,"result":`, ""},
		{``, ""},
	} {
		if got := string(PrefixID([]byte(tc.prefix))); got != tc.id {
			t.Errorf("PrefixID(%s) = %q, want %q", tc.prefix, got, tc.id)
		}
	}
}

// FuzzPrefixID: any prefix is read without a panic, and an id found is
// digits that the prefix spells out.
func FuzzPrefixID(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":12,"result":{"x":"`))
	f.Add([]byte(`{"result":{"id":3},"id":4,`))
	f.Fuzz(func(t *testing.T, prefix []byte) {
		id := PrefixID(prefix)
		if id == nil {
			return
		}
		if strings.Trim(string(id), "0123456789") != "" || !strings.Contains(string(prefix), string(id)) {
			t.Fatalf("id %q is not digits of %q", id, prefix)
		}
	})
}
