package front

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// legacyClient is a 2024-11-05 HTTP+SSE client: one GET stream, on which
// every reply comes, and POSTs to the endpoint it names.
type legacyClient struct {
	t        *testing.T
	srv      *httptest.Server
	hdr      []string
	endpoint string
	sc       *bufio.Scanner
}

// legacyReply is a JSON-RPC reply read from the stream.
type legacyReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// openLegacy opens a legacy session with headers hdr (pairs).
func openLegacy(t *testing.T, srv *httptest.Server, hdr ...string) *legacyClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/servers/x/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse: %d", resp.StatusCode)
	}
	c := &legacyClient{t: t, srv: srv, hdr: hdr, sc: bufio.NewScanner(resp.Body)}
	for c.endpoint == "" && c.sc.Scan() {
		if d, ok := strings.CutPrefix(c.sc.Text(), "data: "); ok {
			c.endpoint = d
		}
	}
	if c.endpoint == "" {
		t.Fatal("no endpoint event")
	}
	return c
}

// post POSTs body to the session's endpoint.
func (c *legacyClient) post(body string) (*http.Response, string) {
	c.t.Helper()
	return do(c.t, c.srv, http.MethodPost, c.endpoint, body, append([]string{"Content-Type", "application/json"}, c.hdr...)...)
}

// accepted POSTs body and checks the 202.
func (c *legacyClient) accepted(body string) *http.Response {
	c.t.Helper()
	resp, text := c.post(body)
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("POST %s: %d %s, want 202", body, resp.StatusCode, text)
	}
	return resp
}

// next reads the next message of the stream (the stream's deadline
// bounds the wait).
func (c *legacyClient) next() legacyReply {
	c.t.Helper()
	for c.sc.Scan() {
		d, ok := strings.CutPrefix(c.sc.Text(), "data: ")
		if !ok {
			continue
		}
		var r legacyReply
		if err := json.Unmarshal([]byte(d), &r); err != nil {
			c.t.Fatalf("event %q: %v", d, err)
		}
		return r
	}
	c.t.Fatalf("the stream ended: %v", c.sc.Err())
	panic("unreachable")
}

// checkStreamRefusal checks that r is a refusal of request id saying
// want, with retryAfter seconds in its data.
func checkStreamRefusal(t *testing.T, r legacyReply, id, want, retryAfter string) {
	t.Helper()
	if string(r.ID) != id || r.Error == nil || !strings.Contains(r.Error.Message, want) {
		t.Fatalf("reply %s %+v: want the refusal of id %s saying %q", r.ID, r.Error, id, want)
	}
	if got := string(r.Error.Data); got != `{"retryAfter":`+retryAfter+`}` {
		t.Errorf("error data %s, want retryAfter %s", got, retryAfter)
	}
}

// A legacy request refused by a limit is accepted (202) and its refusal
// comes on the session's stream as a JSON-RPC error with its id, where
// the client waits for its reply; a refused batch gets one error per
// request; the session goes on once the limit allows.
func TestLegacyRefusalOnStream(t *testing.T) {
	clock := newTestClock()
	_, srv := testServer(t, newFakeBackend(), Config{Limits: &limits.Config{RequestsPerSecond: 0.5, Now: clock.Now}})
	c := openLegacy(t, srv)
	c.accepted(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r := c.next(); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("first reply: %s %+v", r.ID, r.Error)
	}
	resp := c.accepted(`{"jsonrpc":"2.0","id":"two","method":"tools/list"}`)
	if got := resp.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q on the 202, want 2", got)
	}
	checkStreamRefusal(t, c.next(), `"two"`, "rate limit", "2")

	c.accepted(`[{"jsonrpc":"2.0","id":3,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`)
	checkStreamRefusal(t, c.next(), "3", "rate limit", "2")
	checkStreamRefusal(t, c.next(), "4", "rate limit", "2")

	clock.advance(2 * time.Second)
	c.accepted(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	if r := c.next(); string(r.ID) != "5" || r.Error != nil {
		t.Fatalf("after the wait: %s %+v", r.ID, r.Error)
	}
}

// A legacy request holds its slot of the in-flight caps until its reply is
// on the stream, not only until its 202; a legacy request over the global
// cap gets its "overloaded" refusal on the stream.
func TestLegacyInFlightUntilReply(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Limits: &limits.Config{MaxInFlightTotal: 1}})
	c := openLegacy(t, srv)
	c.accepted(`{"jsonrpc":"2.0","id":1,"method":"hold"}`)
	conn := testkit.Receive(t, b.conns, "the session's conn")
	testkit.Receive(t, conn.held, "the held request")

	// The held legacy request fills the cap: a /mcp POST is refused...
	sid := initSessionOrRefused(t, srv)
	if sid != "" {
		t.Fatal("initialize was admitted while the cap was full")
	}
	// ...and so is another legacy request, on the stream.
	c.accepted(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	checkStreamRefusal(t, c.next(), "2", "overloaded", "1")
	// A POST of notifications only is never refused by the caps.
	c.accepted(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`)

	conn.release()
	if r := c.next(); string(r.ID) != "1" || r.Error != nil {
		t.Fatalf("held reply: %s %+v", r.ID, r.Error)
	}
	// Released with its reply: admitted again.
	c.accepted(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if r := c.next(); string(r.ID) != "3" || r.Error != nil {
		t.Fatalf("after the release: %s %+v", r.ID, r.Error)
	}
}

// initSessionOrRefused initializes a session: its id, or "" after
// checking a 503 overload refusal with id 0.
func initSessionOrRefused(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	if resp.StatusCode == http.StatusOK {
		return resp.Header.Get("Mcp-Session-Id")
	}
	checkOverloaded(t, resp, body, "0")
	return ""
}
