package jsonrpc

import (
	"bytes"
	"strings"
	"testing"
)

func TestSplice(t *testing.T) {
	raw := []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"_meta":{"progressToken":"abc"}}}`)
	m, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		edits []Edit
		want  string
	}{
		{"none", nil, string(raw)},
		{"grow id", []Edit{{m.ID, []byte(`"client-7:17"`)}},
			`{"jsonrpc":"2.0","id":"client-7:17","method":"tools/call","params":{"_meta":{"progressToken":"abc"}}}`},
		{"shrink id", []Edit{{m.ID, []byte(`1`)}},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"abc"}}}`},
		{"id and token", []Edit{{m.ID, []byte(`900`)}, {m.ProgressToken, []byte(`"s1-abc"`)}},
			`{"jsonrpc":"2.0","id":900,"method":"tools/call","params":{"_meta":{"progressToken":"s1-abc"}}}`},
		{"token and id, reversed order", []Edit{{m.ProgressToken, []byte(`5`)}, {m.ID, []byte(`"x"`)}},
			`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"_meta":{"progressToken":5}}}`},
		{"absent span ignored", []Edit{{Span{}, []byte(`zzz`)}, {m.ID, []byte(`2`)}},
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"abc"}}}`},
		{"adjacent edits", []Edit{{Span{10, 11}, []byte(` : `)}, {Span{1, 10}, []byte(`"\u006asonrpc"`)}},
			`{"\u006asonrpc" : "2.0","id":17,"method":"tools/call","params":{"_meta":{"progressToken":"abc"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Splice(nil, raw, tt.edits...)
			if string(got) != tt.want {
				t.Fatalf("Splice =\n%s\nwant\n%s", got, tt.want)
			}
			if _, err := Parse(got); err != nil {
				t.Fatalf("result does not parse: %v", err)
			}
			prefix := []byte("prefix:")
			got = Splice(prefix, raw, tt.edits...)
			if string(got) != "prefix:"+tt.want {
				t.Fatalf("Splice with dst = %s", got)
			}
			// With room in dst it appends in place; without, into a new
			// buffer (spliceNew): both give the same bytes.
			roomy := append(make([]byte, 0, 512), "prefix:"...)
			if got = Splice(roomy, raw, tt.edits...); string(got) != "prefix:"+tt.want || &got[0] != &roomy[0] {
				t.Fatalf("Splice into a dst with room = %s (in place: %v)", got, &got[0] == &roomy[0])
			}
		})
	}
	if string(raw) != `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"_meta":{"progressToken":"abc"}}}` {
		t.Fatal("raw modified")
	}
}

func TestSpliceManyEdits(t *testing.T) {
	raw := []byte("abcdefghijklmnopqrstuvwxyz")
	var edits []Edit
	for i := len(raw) - 1; i >= 0; i -= 2 {
		edits = append(edits, Edit{Span{i, i + 1}, []byte{'0' + byte(i%10), '0' + byte(i%10)}})
	}
	got := string(Splice(nil, raw, edits...))
	want := "a11c33e55g77i99k11m33o55q77s99u11w33y55"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if edits[0].Span.Start != 25 {
		t.Fatal("Splice reordered the caller's edits")
	}
}

func TestSplicePanics(t *testing.T) {
	raw := []byte(`{"a":12345}`)
	for name, edits := range map[string][]Edit{
		"overlap":      {{Span{5, 8}, nil}, {Span{7, 10}, nil}},
		"same start":   {{Span{5, 5}, nil}, {Span{5, 6}, nil}},
		"out of range": {{Span{5, 20}, nil}},
		"negative":     {{Span{-1, 2}, nil}},
		"inverted":     {{Span{6, 5}, nil}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			Splice(make([]byte, 0, 64), raw, edits...) // the in-place path checks too
		})
		t.Run(name+", new buffer", func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			Splice(nil, raw, edits...)
		})
	}
}

func TestSpliceNoAllocs(t *testing.T) {
	raw := []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"_meta":{"progressToken":"abc"}}}`)
	m, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, 256)
	id, tok := []byte(`123456`), []byte(`"t"`)
	if n := testing.AllocsPerRun(100, func() {
		dst = Splice(dst[:0], raw, Edit{m.ID, id}, Edit{m.ProgressToken, tok})
	}); n != 0 {
		t.Errorf("Splice allocated %v times", n)
	}
}

// A large message spliced into nothing costs one allocation of exactly its
// size (the reply the mux hands to a session).
func TestSpliceNewBufferExact(t *testing.T) {
	raw := []byte(`{"jsonrpc":"2.0","id":17,"result":{"text":"` + strings.Repeat("x", 1<<20) + `"}}`)
	m, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	id := []byte(`"client:17"`)
	var got []byte
	if n := testing.AllocsPerRun(5, func() { got = Splice(nil, raw, Edit{m.ID, id}) }); n != 1 {
		t.Errorf("Splice allocated %v times", n)
	}
	want := len(raw) + len(id) - m.ID.Len()
	if len(got) != want || cap(got) > want+8<<10 || !bytes.Equal(got[len(got)-100:], raw[len(raw)-100:]) {
		t.Fatalf("len %d cap %d, want %d", len(got), cap(got), want)
	}
}

// More edits than spliceNew takes go through the growing path, with or
// without room in dst, and give the same bytes.
func TestSpliceMoreEditsThanJoinTakes(t *testing.T) {
	raw := []byte("abcdefghijklmnopqrstuvwxyz")
	var edits []Edit
	want := []byte("<")
	for i := range 12 {
		edits = append(edits, Edit{Span: Span{Start: 2 * i, End: 2*i + 1}, Value: []byte{'A' + byte(i), '!'}})
		want = append(want, 'A'+byte(i), '!', raw[2*i+1])
	}
	want = append(want, raw[24:]...)
	for _, dst := range [][]byte{[]byte("<"), append(make([]byte, 0, 100), '<')} {
		if got := Splice(dst, raw, edits...); string(got) != string(want) {
			t.Fatalf("Splice = %q, want %q", got, want)
		}
	}
}
