package jsonrpc

import (
	"fmt"
	"strings"
	"testing"
)

// request builds a tools/call request of about size bytes whose arguments
// hold a list of small objects, the usual shape of large MCP payloads.
func request(size int) []byte {
	var items strings.Builder
	for i := 0; items.Len() < size-230; i++ {
		if i > 0 {
			items.WriteByte(',')
		}
		fmt.Fprintf(&items, `{"text":"some text \u00e9 with an escape\n","n":%d,"list":[1,2.5,true,null]}`, i)
	}
	return []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"search",` +
		`"_meta":{"progressToken":"tok-12345"},"arguments":{"query":"q","items":[` + items.String() + `]}}}`)
}

// wideObject builds a request whose arguments are one object with many
// keys: jsontext switches to a map to find duplicate keys in an object of
// more than 64 keys, which costs allocations.
func wideObject(size int) []byte {
	var args strings.Builder
	for i := 0; args.Len() < size-200; i++ {
		if i > 0 {
			args.WriteByte(',')
		}
		fmt.Fprintf(&args, `"key%d":{"text":"some text","n":%d}`, i, i)
	}
	return []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"search",` +
		`"_meta":{"progressToken":"tok-12345"},"arguments":{` + args.String() + `}}}`)
}

func benchmarkParse(b *testing.B, msg []byte) {
	if _, err := Parse(msg); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := Parse(msg)
		if err != nil || !m.MethodIs("tools/call") {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse1KB(b *testing.B)            { benchmarkParse(b, request(1<<10)) }
func BenchmarkParse64KB(b *testing.B)           { benchmarkParse(b, request(64<<10)) }
func BenchmarkParse64KBWideObject(b *testing.B) { benchmarkParse(b, wideObject(64<<10)) }

func BenchmarkSpliceID(b *testing.B) {
	msg := request(1 << 10)
	m, err := Parse(msg)
	if err != nil {
		b.Fatal(err)
	}
	id := []byte(`"s7:12345"`)
	dst := make([]byte, 0, 2*len(msg))
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		dst = Splice(dst[:0], msg, Edit{m.ID, id}, Edit{m.ProgressToken, id})
	}
}

func TestParseSteadyStateNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under -race")
	}
	msg := request(1 << 10)
	if n := testing.AllocsPerRun(200, func() {
		if _, err := Parse(msg); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Parse of a %d-byte request allocated %v times per run", len(msg), n)
	}
	big := request(64 << 10)
	if n := testing.AllocsPerRun(20, func() {
		if _, err := Parse(big); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Parse of a %d-byte request allocated %v times per run", len(big), n)
	}
}
