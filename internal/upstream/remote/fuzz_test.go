package remote

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mcpgate/mcpgate/internal/eras"
)

func FuzzResolveEndpoint(f *testing.F) {
	for _, s := range []string{"/message?sessionId=1", "message", "http://h:80/m", "//x/m", "https://h/m",
		"http://[::1]:80/", "\x00", "%", " /m ", "http://h/m#f", "?q=1"} {
		f.Add(s)
	}
	base, _ := url.Parse("http://h/a/sse")
	f.Fuzz(func(t *testing.T, data string) {
		ep, err := resolveEndpoint(base, data)
		if err != nil {
			return
		}
		if !sameOrigin(ep, base) || ep.Fragment != "" {
			t.Fatalf("resolveEndpoint(%q) = %v: not on %v's origin", data, ep, base)
		}
	})
}

// FuzzPrefixTap: the tap passes the stream through unchanged, however it
// is split into reads, or stops it at a line or an event over its bounds,
// and keeps at most OversizedPrefixLen bytes.
func FuzzPrefixTap(f *testing.F) {
	f.Add([]byte("data: x\n\ndata: yyyyyyyyyy\r\n\r\n"), 4)
	f.Add(bytes.Repeat([]byte("a"), 5000), 100)
	f.Add(bytes.Repeat([]byte("data\r\n"), 500), 100)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		limit = max(1, limit%8192)
		tap := &prefixTap{r: iotest.OneByteReader(bytes.NewReader(data)), limit: limit}
		out, err := io.ReadAll(tap)
		switch {
		case errors.Is(err, errRawTooLarge):
			if !bytes.HasPrefix(data, out) || tap.line <= limit+rawLineSlack && tap.n <= rawEventFactor*limit+rawLineSlack {
				t.Fatalf("tap stopped at %d bytes (line %d, event %d, limit %d)", len(out), tap.line, tap.n, limit)
			}
		case err != nil || !bytes.Equal(out, data):
			t.Fatalf("tap changed the stream: %v", err)
		}
		if len(tap.big) > OversizedPrefixLen || len(tap.cur) > OversizedPrefixLen {
			t.Fatalf("prefix of %d/%d bytes", len(tap.big), len(tap.cur))
		}
	})
}

// FuzzReadEvents feeds arbitrary response bodies through the SSE path that
// POST and GET streams use: no panic, and every delivered message is a
// non-empty event's data.
func FuzzReadEvents(f *testing.F) {
	f.Add([]byte("id: 1\nretry: 5\ndata:\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\n"))
	f.Add([]byte("event: endpoint\ndata: /x\n\ndata: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]\n\n"))
	f.Add([]byte("data: " + string(bytes.Repeat([]byte("z"), 300)) + "\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := newRecorder(t)
		c, err := Start(Config{URL: "http://127.0.0.1:1/mcp", MaxMessageBytes: 256, Logger: discardLogger}, r)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var st streamState
		n, _ := c.readEvents(1, bytes.NewReader(body), &st, nil)
		lines := 0
		for _, e := range r.snapshot() {
			switch e.kind {
			case "line":
				lines++
				if len(bytes.TrimSpace([]byte(e.data))) == 0 {
					t.Fatalf("empty message delivered")
				}
			case "oversized":
				if len(e.data) > OversizedPrefixLen || e.size <= 256 {
					t.Fatalf("oversized: %d bytes of prefix, size %d", len(e.data), e.size)
				}
			}
		}
		if lines < n {
			t.Fatalf("readEvents counted %d, handler saw %d", n, lines)
		}
	})
}

// FuzzSetRequestHeaders: whatever the message, the headers are ones an
// HTTP client can send, and Mcp-Name decodes to the body's name (or uri).
func FuzzSetRequestHeaders(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Hello, 世界","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"=?base64?x?=","name":1}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools\n/call","params":{"name":"a\r\nb"}}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		h := http.Header{}
		setRequestHeaders(h, msg)
		for k, vs := range h {
			for _, v := range vs {
				if strings.ContainsFunc(v, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
					t.Fatalf("%s: %q is no header value", k, v)
				}
			}
		}
		if v := h.Get("Mcp-Name"); v != "" {
			if _, err := eras.DecodeHeaderValue(v); err != nil {
				t.Fatalf("Mcp-Name %q: %v", v, err)
			}
		}
	})
}

// FuzzStatelessStream feeds arbitrary SSE bodies to a stateless request's
// reader: no panic, at most one reply, nothing after it, and an error
// exactly when there was no reply.
func FuzzStatelessStream(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"late\"}\n\n"))
	f.Add([]byte("event: message\ndata: [{\"jsonrpc\":\"2.0\",\"method\":\"m\"},{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}]\n\n"))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"roots/list\"}\n\ndata: " + strings.Repeat("z", 300) + "\n\n"))
	s, err := NewStateless(Config{URL: "http://127.0.0.1:1/mcp", MaxMessageBytes: 256, Logger: discardLogger})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		replies := 0
		err := s.readStream(bytes.NewReader(body), func(msg []byte) {
			if replies > 0 {
				t.Fatalf("a message after the reply: %s", msg)
			}
		}, func([]byte) { replies++ })
		if replies > 1 || (err == nil) != (replies == 1) {
			t.Fatalf("%d replies, error %v", replies, err)
		}
	})
}
