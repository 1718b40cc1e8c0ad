package jsonrpc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
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
	for name, msg := range map[string][]byte{
		"1KB request":          request(1 << 10),
		"64KB request":         request(64 << 10),
		"64KB wide object":     wideObject(64 << 10),
		"1MiB string":          echoRequest(1<<20, false),
		"1MiB non-ASCII":       echoRequest(1<<20, true),
		"1MiB result":          echoResult(1 << 20),
		"escaped keys":         []byte(`{"\u006asonrpc":"2\u002e0","\u0069d":5,"meth\u006fd":"m","params":{"\u005fmeta":{"progress\u0054oken":"p"}}}`),
		"deep nesting in args": []byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"arguments":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`),
	} {
		if n := testing.AllocsPerRun(5, func() {
			if _, err := Parse(msg); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("Parse of %s (%d bytes) allocated %v times per run", name, len(msg), n)
		}
	}
}

// bigString returns a JSON string body (no quotes) of about n bytes. If
// mixed, it has a multi-byte character or an escape sequence every few
// bytes, a dense mix meant as the worst case of text that is not English.
func bigString(n int, mixed bool) string {
	if !mixed {
		return strings.Repeat("a", n)
	}
	const chunk = `The quick brown fox, naïve café, 日本語 \"quoted\"\n\u00e9\ttab\\ `
	s := strings.Repeat(chunk, n/len(chunk)+1)[:n]
	// Do not cut an escape sequence or a multi-byte character in two.
	for !jsontext.Value(`"` + s + `"`).IsValid() {
		s = s[:len(s)-1]
	}
	return s
}

// echoRequest is a tools/call of the echo tool with a big message argument.
func echoRequest(n int, mixed bool) []byte {
	return []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo",` +
		`"_meta":{"progressToken":"tok-12345"},"arguments":{"message":"` + bigString(n, mixed) + `"}}}`)
}

// echoResult is the echo tool's reply carrying a big text.
func echoResult(n int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` +
		bigString(n, false) + `"}],"isError":false}}`)
}

func BenchmarkParse1MiBString(b *testing.B)      { benchmarkParse(b, echoRequest(1<<20, false)) }
func BenchmarkParse1MiBStringMixed(b *testing.B) { benchmarkParse(b, echoRequest(1<<20, true)) }

func BenchmarkParse1MiBResult(b *testing.B) {
	msg := echoResult(1 << 20)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := Parse(msg)
		if err != nil || m.Kind != KindResponse {
			b.Fatal(err)
		}
	}
}
