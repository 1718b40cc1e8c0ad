package jsonrpc

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// skipsWhole reports whether checkUTF8 and skipValue accept b as one value
// with only whitespace around it.
func skipsWhole(b []byte) bool {
	if checkUTF8(b) != nil {
		return false
	}
	end, e := skipValue(b, 0, 0)
	return e == scanOK && skipSpace(b, end) == len(b)
}

func TestSkipValue(t *testing.T) {
	valid := []string{
		`0`, `-0`, `1`, `-1.5e+10`, `2E-3`, `0.0`, `1e400`, `123456789012345678901234567890`,
		`true`, `false`, `null`, `""`, `"x"`, ` [ ] `, `{}`, `{ "a" : [ 1 , { } , "b" ] }`,
		`{"a":1,"a":2}`, `[[[[]]]]`, "\t\r\n[1]\n",
		`"\"\\\/\b\f\n\r\t\u0000\u001f\uFFFF\ud83d\ude00\uD83D\uDE00"`,
		"\"\u007f é 日本 😀 \uffff\"",               // DEL and multi-byte characters need no escape
		`"` + strings.Repeat("abcdefg", 5) + `"`, // runs longer than a word
		`"12345678"`, `"1234567\""`, `"1234567\\"`,
	}
	invalid := []string{
		``, ` `, `-`, `01`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`, `NaN`, `Infinity`, `1.e3`,
		`tru`, `truE`, `nul`, `falsey`, `[`, `]`, `[1,]`, `[,1]`, `[1 2]`, `{"a"}`, `{"a":}`,
		`{"a":1,}`, `{,}`, `{1:2}`, `{"a" 1}`, `{"a":1]`, `[1}`, `"abc`, `"\`, `"\u12"`, `"\u12x4"`,
		`"\x"`, `"\U0041"`, "\"\x00\"", "\"\x1f\"", "\"a\tb\"", "\"\n\"",
		"\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"1234567\xc3\x28\"", "\"\xc3\\n\"",
		`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800\ud800"`, `"\ud800x"`, `"\ud800\n"`,
		`"\udbff\udbff"`, `"\ud800\`, `"\ud800\u"`, `"\ud800\udc0"`,
		`1 2`, `[1] [2]`, `{} x`, "\ufeff{}",
	}
	for _, s := range valid {
		if !skipsWhole([]byte(s)) {
			t.Errorf("skipValue rejected %q", s)
		}
		if !lax([]byte(s)) {
			t.Errorf("test case %q is not valid for jsontext", s)
		}
	}
	for _, s := range invalid {
		if skipsWhole([]byte(s)) {
			t.Errorf("skipValue accepted %q", s)
		}
		if lax([]byte(s)) {
			t.Errorf("test case %q is valid for jsontext", s)
		}
	}
}

// TestSkipValueEveryPrefix checks that no proper prefix of a valid value is
// taken for a whole one, wherever the cut falls (inside an escape, a
// surrogate pair, a multi-byte character, a number, a literal).
func TestSkipValueEveryPrefix(t *testing.T) {
	v := []byte(`{"a":[1,-2.5e+3,true,false,null,"x\"\\\u00e9\ud83d\ude00é😀` + strings.Repeat("y", 20) + `"],"b":{}}`)
	for n := range len(v) {
		if skipsWhole(v[:n]) {
			t.Errorf("skipValue accepted the prefix %q", v[:n])
		}
	}
	if !skipsWhole(v) {
		t.Fatal("skipValue rejected the whole value")
	}
}

// TestSkipValueDepth checks the nesting limit jsontext applies (10000
// levels) and that a much deeper input is refused quickly, without
// recursion.
func TestSkipValueDepth(t *testing.T) {
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		arrays := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		objects := []byte(strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n))
		for _, v := range [][]byte{arrays, objects} {
			if got, want := skipsWhole(v), lax(v); got != want || want != (n <= maxDepth) {
				t.Errorf("depth %d: skipValue accepts = %v, jsontext = %v", n, got, want)
			}
		}
	}
	// Refused quickly: the scan stops at the '[' one past maxDepth,
	// whatever follows it, so its work is that of a maxDepth-deep value.
	deep := []byte(strings.Repeat("[", 100000))
	if at, e := skipValue(deep, 0, 0); e != scanDepth || at != maxDepth {
		t.Errorf("100000 '[': %v at offset %d, want scanDepth at %d", e, at, maxDepth)
	}
}

// TestScanStringWordBoundaries moves each special byte across every
// position of the eight-byte words scanString reads.
func TestScanStringWordBoundaries(t *testing.T) {
	for _, special := range []string{`\"`, `\\`, `\u00e9`, `é`, "\x01", "\xff", `"`, `\ud83d\ude00`, "😀"} {
		for pad := range 20 {
			s := []byte(`"` + strings.Repeat("a", pad) + special + strings.Repeat("b", 9) + `"`)
			if got, want := skipsWhole(s), lax(s); got != want {
				t.Errorf("%q: skipValue accepts = %v, jsontext = %v", s, got, want)
			}
		}
	}
}

func TestEqualUnquoted(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{`id`, `id`, true}, {`id`, `\u0069d`, true}, {`\u0069\u0064`, `\u0069d`, true},
		{`id`, `ids`, false}, {`ids`, `id`, false}, {``, ``, true}, {``, `\u0041`, false},
		{`a/b`, `a\/b`, true}, {`\n`, "\n", true}, {`😀`, `\ud83d\ude00`, true},
		{`\uD83D\uDE00`, `\ud83d\ude00`, true}, {`é`, `\u00e9`, true}, {`é`, `\u00e8`, false},
	} {
		if got := equalUnquoted([]byte(tt.a), []byte(tt.b)); got != tt.want {
			t.Errorf("equalUnquoted(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

func TestNameSetManyNames(t *testing.T) {
	var b strings.Builder
	var spans []Span
	for i := range 3 * smallNames {
		name := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if i == 2*smallNames {
			name = `\u0061` + name[1:] // escaped, and the same as a new name
		}
		b.WriteString(name)
		spans = append(spans, Span{Start: b.Len() - len(name), End: b.Len()})
	}
	raw := []byte(b.String())
	var ns nameSet
	for i, s := range spans {
		escaped := strings.Contains(string(raw[s.Start:s.End]), `\`)
		if dup := ns.add(raw, s, escaped); dup != (i == 2*smallNames) {
			t.Errorf("name %d %q: dup = %v", i, raw[s.Start:s.End], dup)
		}
	}
	if dup := ns.add(raw, spans[3], false); !dup {
		t.Error("a name seen among the first few was not found in the map")
	}
}

func FuzzSkipValueAgreesWithJSONText(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{`"\ud800\udc00"`, `"\udc00"`, `[1,{"a":"b"}]`, `-0.0e-0`, "\"abcdefgh\xe6\x97\xa5\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := skipsWhole(b), lax(b); got != want {
			t.Fatalf("skipValue accepts = %v, jsontext (AllowDuplicateNames) = %v", got, want)
		}
		// A value found must be one value on its own, wherever it ends.
		if checkUTF8(b) != nil {
			return
		}
		if end, e := skipValue(b, 0, 0); e == scanOK && !jsontext.Value(b[:end]).IsValid(jsontext.AllowDuplicateNames(true)) {
			t.Fatalf("skipValue found the value %q, which is not one", b[:end])
		}
	})
}
