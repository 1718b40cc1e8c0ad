package jsonrpc

import (
	"encoding/json"
	"testing"
)

func TestWalkSkipValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		at   int
		want int
	}{
		{`"a\"b" ,`, 0, 6},
		{`{"k":["}",{"x":1}]} `, 0, 19},
		{`[1,[2,[3]]],`, 0, 11},
		{`123}`, 0, 3},
		{`true`, 0, 4},
		{`{"k":"v"`, 0, -1},  // not closed
		{`"open`, 0, -1},     // not closed
		{`{"k":"\"}`, 0, -1}, // the quote is escaped
		{`[`, 0, -1},
		{``, 0, -1},
		{`1`, 5, -1},  // past the end
		{`1`, -1, -1}, // before the start
	} {
		if got := SkipValue([]byte(tc.in), tc.at); got != tc.want {
			t.Errorf("SkipValue(%q, %d) = %d, want %d", tc.in, tc.at, got, tc.want)
		}
	}
	if end, esc := SkipString([]byte(`"a\nb"x`), 0); end != 6 || !esc {
		t.Errorf(`SkipString("a\nb") = %d, %v; want 6, true`, end, esc)
	}
	if end, esc := SkipString([]byte(`"ab"`), 0); end != 4 || esc {
		t.Errorf(`SkipString("ab") = %d, %v; want 4, false`, end, esc)
	}
}

// FuzzWalkSkipValue: on valid JSON, SkipValue ends the value exactly where the
// validating scanner does; on any bytes, from any start, it never panics
// and ends within the bytes at or past its start (at it: no value there,
// a delimiter or whitespace), or reports -1.
func FuzzWalkSkipValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,"]",{"b":null}]}`, ` "x\"y" `, `[[[`, `"\`, `-1.5e3`, `{"k":"v"}x`} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, at int) {
		if at >= 0 && at <= len(b) {
			if end := SkipValue(b, at); end != -1 && (end < at || end > len(b)) {
				t.Fatalf("SkipValue(%q, %d) = %d: outside [%d, %d]", b, at, end, at, len(b))
			}
		}
		if !json.Valid(b) {
			return
		}
		i := SkipSpace(b, 0)
		want, e := skipValue(b, i, 0)
		if e != scanOK {
			t.Fatalf("json.Valid accepts %q but the scanner does not", b)
		}
		if got := SkipValue(b, i); got != want {
			t.Fatalf("SkipValue(%q, %d) = %d, the scanner ends it at %d", b, i, got, want)
		}
	})
}
