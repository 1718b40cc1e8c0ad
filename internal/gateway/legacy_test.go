package gateway

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// legacyClient is a 2024-11-05 HTTP+SSE client: one GET stream, POSTs to
// the endpoint it announces.
type legacyClient struct {
	t        *testing.T
	g        *testGateway
	host     string // Host header, for subdomain routing
	endpoint string
	events   chan sse.Event
	close    func()
}

func openLegacy(t *testing.T, g *testGateway, path string, mod func(*http.Request)) *legacyClient {
	t.Helper()
	c, status := tryLegacy(t, g, path, mod)
	if c == nil {
		t.Fatalf("GET %s: status %d", path, status)
	}
	return c
}

// tryLegacy opens a legacy stream, or returns the status that refused it.
func tryLegacy(t *testing.T, g *testGateway, path string, mod func(*http.Request)) (*legacyClient, int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.URL+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	if mod != nil {
		mod(req)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, resp.StatusCode
	}
	c := &legacyClient{t: t, g: g, host: req.Host, events: make(chan sse.Event, 100)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.events)
		rd := sse.NewReader(resp.Body, 0)
		for {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			ev.Data = bytes.Clone(ev.Data)
			c.events <- ev
		}
	}()
	c.close = func() { resp.Body.Close(); <-done }
	t.Cleanup(c.close)
	ev := c.next()
	if ev.Event != "endpoint" {
		t.Fatalf("first event %q, want endpoint", ev.Event)
	}
	c.endpoint = string(ev.Data)
	return c, resp.StatusCode
}

func (c *legacyClient) next() sse.Event {
	c.t.Helper()
	select {
	case ev, ok := <-c.events:
		if !ok {
			c.t.Fatal("legacy stream ended")
		}
		return ev
	case <-time.After(20 * time.Second):
		c.t.Fatal("nothing on the legacy stream")
	}
	return sse.Event{}
}

// post sends one message to the endpoint and returns the HTTP status.
func (c *legacyClient) post(body string) int {
	c.t.Helper()
	url := c.endpoint
	if strings.HasPrefix(url, "/") {
		url = c.g.URL + url
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if c.host != "" {
		req.Host = c.host
	}
	resp, err := c.g.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (c *legacyClient) call(body string) rpc {
	c.t.Helper()
	if st := c.post(body); st != http.StatusAccepted {
		c.t.Fatalf("POST: status %d, want 202", st)
	}
	for {
		ev := c.next()
		if ev.Event != "message" {
			c.t.Fatalf("event %q, want message", ev.Event)
		}
		if m := decode(c.t, ev.Data); m.Method == "" {
			return m
		}
	}
}

func (c *legacyClient) initialize() {
	c.t.Helper()
	m := c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"legacy","version":"1"}}}`)
	if m.Error != nil || !strings.Contains(string(m.Result), `"2024-11-05"`) {
		c.t.Fatalf("legacy initialize: %s", m.Result)
	}
	if st := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); st != http.StatusAccepted {
		c.t.Fatalf("initialized: %d", st)
	}
}

// TestLegacySSE: the 2024-11-05 transport at /servers/{name}/sse and, for
// clients falling back on the same URL, at /servers/{name}/mcp; several
// legacy sessions on one shared process each get only their own replies.
func TestLegacySSE(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	var cs []*legacyClient
	for i := range 4 {
		path := []string{"/servers/fake/sse", "/servers/fake/mcp"}[i%2]
		c := openLegacy(t, g, path, nil)
		if !strings.HasPrefix(c.endpoint, "/servers/fake/messages?sessionId=") {
			t.Fatalf("endpoint %q", c.endpoint)
		}
		c.initialize()
		cs = append(cs, c)
	}
	for i, c := range cs {
		want := fmt.Sprintf("legacy %d", i)
		m := c.call(callBody("1", "echo", map[string]string{"message": want}, ""))
		if got := toolText(t, m); got != want || string(m.ID) != "1" {
			t.Fatalf("session %d got id %s %q", i, m.ID, got)
		}
	}
	// An unknown session id is refused.
	bad := &legacyClient{t: t, g: g, endpoint: "/servers/fake/messages?sessionId=nope"}
	if st := bad.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); st != http.StatusNotFound {
		t.Fatalf("unknown legacy session: %d", st)
	}
}

// TestLegacyReattach: an EventSource that reconnects with Last-Event-ID
// within the grace period gets its session back, with what it missed.
func TestLegacyReattach(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := openLegacy(t, g, "/servers/fake/sse", nil)
	c.initialize()
	m := c.call(callBody("1", "echo", map[string]string{"message": "before"}, ""))
	toolText(t, m)
	c.close()
	// The reply to this call lands while no stream is attached.
	if st := c.post(callBody("2", "echo", map[string]string{"message": "missed"}, "")); st != http.StatusAccepted {
		t.Fatalf("POST while detached: %d", st)
	}
	sessionID := strings.TrimPrefix(c.endpoint, "/servers/fake/messages?sessionId=")
	var back *legacyClient
	testkit.WaitFor(t, "the old stream to detach", func() bool {
		var status int
		// The initialize reply and "before" were seen: resume after event 2.
		back, status = tryLegacy(t, g, "/servers/fake/sse", func(r *http.Request) { r.Header.Set("Last-Event-ID", sessionID+".2") })
		if back == nil && status != http.StatusConflict {
			t.Fatalf("re-attach: status %d", status)
		}
		return back != nil
	})
	if back.endpoint != c.endpoint {
		t.Fatalf("reattached to %q, want %q", back.endpoint, c.endpoint)
	}
	ev := back.next()
	if got := toolText(t, decode(t, ev.Data)); got != "missed" {
		t.Fatalf("replayed %q", got)
	}
}

// TestHostRouting: with hostRouting.domain, the subdomain names the server
// on /mcp, /sse and /messages; forwarded headers count only when trusted.
func TestHostRouting(t *testing.T) {
	for _, trust := range []bool{false, true} {
		t.Run(fmt.Sprintf("trust=%v", trust), func(t *testing.T) {
			cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
			cfg.Gateway.HostRouting.Domain = "mcp.test"
			cfg.Gateway.TrustProxyHeaders = trust
			g := startGateway(t, cfg)

			c := g.client("fake")
			c.url = g.URL + "/mcp"
			r := c.do(t, hostRequest(c.request(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`), "fake.mcp.test:8080"), nil)
			if r.Status != http.StatusOK || r.Header.Get("Mcp-Session-Id") == "" {
				t.Fatalf("initialize by host: %d %s", r.Status, r.Body)
			}
			if r := c.do(t, hostRequest(c.request(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"ping"}`), "other.mcp.test"), nil); r.Status != http.StatusNotFound {
				t.Fatalf("unknown subdomain: %d", r.Status)
			}

			l := openLegacy(t, g, "/sse", func(r *http.Request) { r.Host = "fake.mcp.test" })
			if !strings.HasPrefix(l.endpoint, "/messages?sessionId=") {
				t.Fatalf("host-routed endpoint %q", l.endpoint)
			}
			l.initialize()

			fwd := func(r *http.Request) {
				r.Host = "127.0.0.1"
				r.Header.Set("X-Forwarded-Host", "fake.mcp.test")
				r.Header.Set("X-Forwarded-Proto", "https")
			}
			req, _ := http.NewRequest(http.MethodGet, g.URL+"/sse", nil)
			req.Header.Set("Accept", "text/event-stream")
			fwd(req)
			resp, err := g.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if !trust {
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("untrusted X-Forwarded-Host routed: %d", resp.StatusCode)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("trusted X-Forwarded-Host: %d", resp.StatusCode)
			}
			l2 := openLegacy(t, g, "/sse", fwd)
			if !strings.HasPrefix(l2.endpoint, "https://fake.mcp.test/messages?sessionId=") {
				t.Fatalf("endpoint behind a trusted proxy %q", l2.endpoint)
			}
		})
	}
}

func hostRequest(r *http.Request, host string) *http.Request {
	r.Host = host
	return r
}
