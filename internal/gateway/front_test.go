package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestHTTPFrontRejects checks each way a request can be refused before it
// reaches a server, with its status and JSON-RPC error.
func TestHTTPFrontRejects(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.MaxBodyBytes = 1024
	g := startGateway(t, cfg)
	c := g.client("fake")
	c.connect(t)
	echo := callBody("1", "echo", map[string]string{"message": "x"}, "")

	tests := []struct {
		name   string
		mod    func(r *http.Request)
		body   string
		status int
		code   int    // JSON-RPC error code in the body; 0: not checked
		substr string // in the body
	}{
		{name: "no SSE in Accept", body: echo, mod: func(r *http.Request) { r.Header.Set("Accept", "application/json") }, status: 406},
		{name: "no JSON in Accept", body: echo, mod: func(r *http.Request) { r.Header.Set("Accept", "text/event-stream") }, status: 406},
		{name: "content type", body: echo, mod: func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, status: 415},
		{name: "no session", body: echo, mod: func(r *http.Request) { r.Header.Del("Mcp-Session-Id") }, status: 400, substr: "Mcp-Session-Id"},
		{name: "unknown session", body: echo, mod: func(r *http.Request) { r.Header.Set("Mcp-Session-Id", "nope") }, status: 404},
		{name: "unknown server", body: echo, mod: func(r *http.Request) { r.URL.Path = "/servers/missing/mcp" }, status: 404, substr: `\"missing\"`},
		{name: "foreign origin", body: echo, mod: func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, status: 403},
		{name: "unsupported version", body: echo, mod: func(r *http.Request) { r.Header.Set("Mcp-Protocol-Version", "1999-01-01") }, status: 400, substr: "1999-01-01"},
		{name: "body too large", body: callBody("1", "echo", map[string]string{"message": strings.Repeat("x", 2000)}, ""), status: 413},
		{name: "malformed JSON", body: `{"jsonrpc":"2.0","id":1,`, status: 400, code: -32700},
		{name: "trailing garbage", body: echo + "x", status: 400, code: -32700},
		{name: "duplicate key", body: `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, status: 400, code: -32700},
		{name: "not JSON-RPC", body: `{"jsonrpc":"2.0","id":1}`, status: 400, code: -32600},
		{name: "batch in 2025-11-25", body: "[" + echo + "]", status: 400, code: -32600},
		{name: "PUT", body: echo, mod: func(r *http.Request) { r.Method = http.MethodPut }, status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := c.request(http.MethodPost, tt.body)
			if tt.mod != nil {
				tt.mod(req)
			}
			r := c.do(t, req, nil)
			if r.Status != tt.status {
				t.Fatalf("status %d, want %d (body %s)", r.Status, tt.status, r.Body)
			}
			if tt.code != 0 {
				m := decode(t, r.Body)
				if m.Error == nil || m.Error.Code != tt.code || string(m.ID) != "null" {
					t.Fatalf("body %s, want error %d with id null", r.Body, tt.code)
				}
			}
			if !bytes.Contains(r.Body, []byte(tt.substr)) {
				t.Fatalf("body %s does not contain %s", r.Body, tt.substr)
			}
		})
	}
	// An allowed origin (localhost on any port) passes.
	req := c.request(http.MethodPost, echo)
	req.Header.Set("Origin", "http://localhost:6274")
	if r := c.do(t, req, nil); r.Status != http.StatusOK {
		t.Fatalf("localhost origin: status %d", r.Status)
	}
}

// TestBatchOnlyFor20250326: a 2025-03-26 session may batch; its replies come
// back as one array with every id in place.
func TestBatchOnlyFor20250326(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.version = "2025-03-26"
	c.connect(t)
	r := c.post(t, "["+callBody(`"a"`, "echo", map[string]string{"message": "A"}, "")+","+
		callBody("12345678901234567890123", "echo", map[string]string{"message": "B"}, "")+
		`,{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`)
	if r.Status != http.StatusOK || len(r.Msgs) != 2 {
		t.Fatalf("status %d, %d messages: %s", r.Status, len(r.Msgs), r.Body)
	}
	got := map[string]string{}
	for _, raw := range r.Msgs {
		m := decode(t, raw)
		got[string(m.ID)] = toolText(t, m)
	}
	if got[`"a"`] != "A" || got["12345678901234567890123"] != "B" {
		t.Fatalf("batch replies %v", got)
	}
}

// TestSessionLifecycle: a second GET stream is refused, DELETE ends the
// session, and the session limit answers 503 with Retry-After.
func TestSessionLifecycle(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.MaxSessions = 2
	g := startGateway(t, cfg)
	a, b := g.client("fake"), g.client("fake")
	a.connect(t)
	b.connect(t)

	events, closeGET := openGET(t, a)
	defer closeGET()
	_ = events
	if r := a.do(t, getRequest(a), nil); r.Status != http.StatusConflict {
		t.Fatalf("second GET: status %d, want 409", r.Status)
	}
	third := g.client("fake")
	r := third.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("over the session limit: status %d, Retry-After %q", r.Status, r.Header.Get("Retry-After"))
	}
	if r := b.do(t, b.request(http.MethodDelete, ""), nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: status %d", r.Status)
	}
	if r := b.post(t, callBody("1", "echo", map[string]string{"message": "x"}, "")); r.Status != http.StatusNotFound {
		t.Fatalf("after DELETE: status %d, want 404", r.Status)
	}
	third.connect(t) // the freed slot is usable
}

// TestIdleSessionsExpire: a session with nothing in flight expires, and in
// session mode its process stops.
func TestIdleSessionsExpire(t *testing.T) {
	marker := "expire-" + time.Now().Format("150405.000000000")
	s := fakeServer("iso", testkit.FakeOptions{Marker: marker})
	s.Isolation = config.IsolationSession
	cfg := newConfig(s)
	cfg.Gateway.SessionIdleTimeout = 2 * time.Second // long enough to see the process first on a loaded machine
	cfg.Gateway.SessionSweepInterval = 20 * time.Millisecond
	g := startGateway(t, cfg)
	c := g.client("iso")
	c.connect(t)
	if len(testkit.Procs(marker)) == 0 {
		t.Fatal("no process for the session")
	}
	testkit.WaitFor(t, "the idle session to expire", func() bool { return g.gw.Handler.Sessions() == 0 })
	if r := c.post(t, callBody("1", "echo", map[string]string{"message": "x"}, "")); r.Status != http.StatusNotFound {
		t.Fatalf("expired session: status %d, want 404", r.Status)
	}
	if left := testkit.WaitProcsGone(marker, 10*time.Second); len(left) != 0 {
		t.Fatalf("expired session's process still runs: %+v", left)
	}
}

func getRequest(c *mcpClient) *http.Request {
	req := c.request(http.MethodGet, "")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Del("Content-Type")
	return req
}

// openGET opens the session's standalone stream and returns its messages.
func openGET(t *testing.T, c *mcpClient) (<-chan json.RawMessage, func()) {
	return openStream(t, c, getRequest(c))
}

func openStream(t *testing.T, c *mcpClient, req *http.Request) (<-chan json.RawMessage, func()) {
	t.Helper()
	resp, err := c.g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET: status %d: %s", resp.StatusCode, body)
	}
	ch := make(chan json.RawMessage, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		rd := sse.NewReader(resp.Body, 0)
		for {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > 0 {
				c.lastEventID = ev.ID // read by the test after it receives the message
				ch <- json.RawMessage(bytes.Clone(ev.Data))
			}
		}
	}()
	return ch, func() { resp.Body.Close(); <-done }
}

// next returns the next message of a stream, failing after a bound.
func next(t *testing.T, ch <-chan json.RawMessage) rpc {
	t.Helper()
	select {
	case raw, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return decode(t, raw)
	case <-time.After(20 * time.Second):
		t.Fatal("no message on the stream")
	}
	return rpc{}
}

// TestSSEWireFormat reads a GET stream's raw bytes: a 2025-11-25 stream opens
// with a priming event (an id, a retry hint, empty data), and an idle stream
// gets keep-alive comments.
func TestSSEWireFormat(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.KeepAliveInterval = 20 * time.Millisecond
	g := startGateway(t, cfg)
	c := g.client("fake")
	c.connect(t)
	resp, err := c.g.http.Do(getRequest(c))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	rd := bufio.NewReader(resp.Body)
	var lines []string
	for len(lines) < 6 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", lines, err)
		}
		lines = append(lines, strings.TrimRight(line, "\n"))
	}
	if !strings.HasPrefix(lines[0], "id: 0-") || !strings.HasPrefix(lines[1], "retry: ") || lines[2] != "data: " && lines[2] != "data:" || lines[3] != "" {
		t.Fatalf("stream does not open with a priming event: %q", lines)
	}
	if !strings.HasPrefix(lines[4], ":") || lines[5] != "" {
		t.Fatalf("no keep-alive comment on the idle stream: %q", lines[4:])
	}
}
