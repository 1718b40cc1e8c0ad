package echoserver

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

func TestAppendScanned(t *testing.T) {
	tests := []struct {
		name, msg string
		ok        bool // answered from the scan; else left to the parser
	}{
		{"integer id", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"message":"abc-s1-c0-1"}}}`, true},
		{"negative id", `{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`, true},
		{"string id", `{"jsonrpc":"2.0","id":"g-1.2","method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`, true},
		{"escapes kept as written", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a \"q\" \\ \u00e9"}}}`, true},
		{"message ending in an escaped backslash", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a\\"}}}`, true},
		{"empty message", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":""}}}`, true},
		{"whitespace", `{"jsonrpc":"2.0", "id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`, false},
		{"_meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"echo","arguments":{"message":"m"}}}`, false},
		{"another tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"message":"m"}}}`, false},
		{"another argument after", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m","x":"y"}}}`, false},
		{"argument before", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m","x":"y","message":"z"}}}`, false},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`, false},
		{"string id with an escape", `{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`, false},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`, false},
		{"trailing member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}},"x":1}`, false},
		{"escaped closing quote", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m\"}}}`, false},
		{"two strings", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m","x":"y"}}}`, false},
		{"too short", `{"jsonrpc":"2.0","id":`, false},
		{"ping", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := appendScanned([]byte("prefix:"), []byte(tt.msg))
			if ok != tt.ok {
				t.Fatalf("appendScanned(%s) ok = %v, want %v", tt.msg, ok, tt.ok)
			}
			if !ok {
				if string(got) != "prefix:" {
					t.Fatalf("appendScanned appended %q when it did not answer", got)
				}
				return
			}
			want, _, _ := AppendReply([]byte("prefix:"), []byte(tt.msg))
			if !bytes.Equal(got, want) {
				t.Fatalf("appendScanned(%s)\n = %s\nwant %s (the parser's reply)", tt.msg, got, want)
			}
		})
	}
}

// FuzzAppendScanned: whatever the message, the scan does not panic, and
// whenever it answers a message that is valid JSON-RPC its reply is the
// parser's, byte for byte.
func FuzzAppendScanned(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a"}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo","arguments":{"message":"a\\\"b\\"}}}`,
		`{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"echo","arguments":{"message":"\""}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a","b":"c"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		got, ok := appendScanned(nil, msg)
		if !ok {
			if len(got) != 0 {
				t.Fatalf("appended %q without answering", got)
			}
			return
		}
		if _, err := jsonrpc.Parse(msg); err != nil || !jsontext.Value(msg).IsValid() {
			return // not JSON: the scan echoes it unchecked, by design
		}
		want, _, _ := AppendReply(nil, msg)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendScanned(%q)\n = %q\nwant %q", msg, got, want)
		}
	})
}

// The scan changes nothing a client sees: a stdio run of echoes, pings and
// notifications gets the same replies with and without it.
func TestServeStdioScan(t *testing.T) {
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i := range 200 {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m%d-%s"}}}`+"\n", i, i, strings.Repeat("x", i*97))
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":"p%d","method":"ping"}`+"\n", i)
	}
	in.WriteString(`{"jsonrpc":"2.0","id":"u","method":"tools/call","params":{"name":"echo","arguments":{"message":"u","other":1}}}` + "\n")
	var plain, scanned bytes.Buffer
	if err := ServeStdio(bytes.NewReader(in.Bytes()), &plain); err != nil {
		t.Fatal(err)
	}
	if err := ServeStdioWith(bytes.NewReader(in.Bytes()), &scanned, Options{Scan: true}); err != nil {
		t.Fatal(err)
	}
	if plain.Len() == 0 || !bytes.Equal(plain.Bytes(), scanned.Bytes()) {
		t.Fatalf("with Scan the replies differ:\n%.300s\nwithout:\n%.300s", scanned.Bytes(), plain.Bytes())
	}
	if n := bytes.Count(scanned.Bytes(), []byte("\n")); n != 401 {
		t.Fatalf("%d replies, want 401", n)
	}
}

func TestHTTPScan(t *testing.T) {
	h := NewHandler()
	h.Options.Scan = true
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	f := &httpFixture{t: t, h: h, srv: srv}
	id := f.initialize("2025-11-25")
	resp := f.do("POST", id, echoCall)
	if got := readAll(t, resp); resp.StatusCode != 200 || got != echoReply || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("scanned echo: %s %q %s; want 200 %s", resp.Status, resp.Header.Get("Content-Type"), got, echoReply)
	}
	resp = f.do("POST", "no-such-session", echoCall)
	if got := readAll(t, resp); resp.StatusCode != 404 {
		t.Fatalf("scanned echo of an unknown session: %s %s; want 404", resp.Status, got)
	}
	// Not the shape the scan answers: parsed as usual.
	resp = f.do("POST", id, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{"message":"x"},"name":"echo"}}`)
	if got := readAll(t, resp); !strings.Contains(got, `"id":8,"result":{"content":[{"type":"text","text":"x"}]}`) {
		t.Fatalf("parsed echo: %s %s", resp.Status, got)
	}
}

// Burn spends CPU time, not wall time: the calling thread's CPU clock
// advances by at least the burn, however busy the machine is.
func TestBurnCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the thread's CPU clock is read on Linux only")
	}
	const d = 3 * time.Millisecond
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, ok := threadCPU()
	if !ok {
		t.Fatal("cannot read the thread's CPU clock")
	}
	o := &Options{Burn: d}
	out, _, _ := o.reply(nil, []byte(echoCall), false)
	after, _ := threadCPU()
	if string(out) != echoReply {
		t.Fatalf("reply %s, want %s", out, echoReply)
	}
	if spent := after - before; spent < d {
		t.Fatalf("an echo with Burn %s used %s of CPU", d, spent)
	}
	// The scanned path burns too.
	o.Scan = true
	before, _ = threadCPU()
	_, _, _ = o.reply(nil, []byte(echoCall), false)
	after, _ = threadCPU()
	if spent := after - before; spent < d {
		t.Fatalf("a scanned echo with Burn %s used %s of CPU", d, spent)
	}
}
