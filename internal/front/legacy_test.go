package front

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A legacy client that vanished (or stopped reading its stream) while it
// keeps POSTing cannot make the gateway hold an unbounded pile of replies:
// once the session's unread replies pass the stream's byte bound, new
// messages get 503 with Retry-After. The replies of a legacy session's
// stream are finals, never dropped, and used to pile up without bound until
// the grace period ended: against the binary, 400 POSTs of 1 MB echoes in
// 1.25 s grew the gateway by 110 MB, and a client that keeps its stream
// attached without reading holds them for as long as it likes.
func TestLegacyUnreadRepliesBounded(t *testing.T) {
	b := newFakeBackend()
	const bound = 4096
	// A grace far beyond testkit.WaitTimeout: the stream is let go because
	// the client left, not because the grace ran out.
	h, srv := testServer(t, b, Config{ReplayBytes: bound, LegacyGrace: 10 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/servers/x/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	endpoint := ""
	for endpoint == "" && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			endpoint = d
		}
	}
	// The client vanishes; its session waits out the grace period.
	cancel()
	resp.Body.Close()
	sid := endpoint[strings.Index(endpoint, "sessionId=")+len("sessionId="):]
	s := h.store.Lookup(sid)
	if s == nil {
		t.Fatalf("no session %q", sid)
	}
	testkit.WaitFor(t, "the stream to be let go", func() bool { return !s.General().Attached() })

	refused := 0
	for i := range 200 {
		r, body := do(t, srv, http.MethodPost, endpoint, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"x","params":{"pad":%q}}`, i, strings.Repeat("p", 64)),
			"Content-Type", "application/json")
		switch r.StatusCode {
		case http.StatusAccepted:
		case http.StatusServiceUnavailable:
			if r.Header.Get("Retry-After") == "" || !strings.Contains(body, "not read") {
				t.Fatalf("refusal: %s %q", r.Header.Get("Retry-After"), body)
			}
			refused++
		default:
			t.Fatalf("POST %d: %d %s", i, r.StatusCode, body)
		}
	}
	// One batch of replies may land past the bound: the check is before
	// the messages are handled.
	if n := s.General().Bytes(); refused == 0 || n > 2*bound {
		t.Fatalf("%d of 200 POSTs refused; the stream keeps %d bytes (bound %d)", refused, n, bound)
	}
}

// Behind a proxy that serves the gateway under a path (gateway.auth.publicUrl
// https://mcp.example.com/gw, the proxy stripping /gw), a legacy client that
// came through it is told a /messages URL under that path: the client
// resolves the endpoint event against its own URL, and the path the event
// used to name (/servers/x/messages, without /gw) reached the proxy's other
// routes, never the gateway (the Inspector CLI and the TypeScript SDK's
// SSEClientTransport failed their first POST with the proxy's 404). A client
// on the gateway's own address still gets the bare path.
func TestLegacyEndpointUnderPublicURLPath(t *testing.T) {
	for _, tc := range []struct {
		name       string
		trust      bool
		path, host string
		hdr        []string
		want       string
	}{
		{"server through the proxy", false, "/servers/x/sse", "mcp.example.com", nil, "/gw/servers/x/messages"},
		{"server through the proxy, public port", false, "/servers/x/sse", "MCP.example.com:443", nil, "/gw/servers/x/messages"},
		{"default endpoint through the proxy", false, "/sse", "mcp.example.com", nil, "/gw/messages"},
		{"fallback on /mcp through the proxy", false, "/servers/x/mcp", "mcp.example.com", nil, "/gw/servers/x/messages"},
		{"direct", false, "/servers/x/sse", "", nil, "/servers/x/messages"},
		{"forwarded host", true, "/servers/x/sse", "", []string{"X-Forwarded-Host", "mcp.example.com", "X-Forwarded-Proto", "https"}, "https://mcp.example.com/gw/servers/x/messages"},
		{"another forwarded host", true, "/servers/x/sse", "", []string{"X-Forwarded-Host", "other.example.com", "X-Forwarded-Proto", "https"}, "https://other.example.com/servers/x/messages"},
		{"forwarded host not trusted", false, "/servers/x/sse", "", []string{"X-Forwarded-Host", "mcp.example.com"}, "/servers/x/messages"},
		// A forwarded host is canonical in the URL, as in resource URLs; one
		// that is no host name makes no URL: the path alone.
		{"forwarded host canonical", true, "/servers/x/sse", "", []string{"X-Forwarded-Host", "Other.Example.com:443", "X-Forwarded-Proto", "HTTPS"}, "https://other.example.com/servers/x/messages"},
		{"forwarded host with userinfo", true, "/servers/x/sse", "", []string{"X-Forwarded-Host", "a@evil.example"}, "/servers/x/messages"},
		{"forwarded host with a path", true, "/servers/x/sse", "", []string{"X-Forwarded-Host", "x/#"}, "/servers/x/messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, all := newFakeBackend(), newFakeBackend()
			_, srv := routedServer(t, Config{
				Backends:          map[string]conn.Backend{"x": server},
				Endpoints:         map[string]conn.Backend{"all": all},
				PublicURL:         "https://mcp.example.com/gw",
				TrustProxyHeaders: tc.trust,
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+tc.path, nil)
			req.Header.Set("Accept", "text/event-stream")
			if tc.host != "" {
				req.Host = tc.host
			}
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d", tc.path, resp.StatusCode)
			}
			sc := bufio.NewScanner(resp.Body)
			endpoint := ""
			for endpoint == "" && sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					endpoint = d
				}
			}
			path, query, _ := strings.Cut(endpoint, "?")
			if path != tc.want || !strings.HasPrefix(query, "sessionId=") {
				t.Fatalf("endpoint event %q, want %s?sessionId=...", endpoint, tc.want)
			}
			// What the proxy forwards (the prefix stripped) reaches the session.
			u, err := url.Parse(endpoint)
			if err != nil {
				t.Fatal(err)
			}
			fwd := strings.TrimPrefix(u.Path, "/gw") + "?" + u.RawQuery
			r, body := do(t, srv, http.MethodPost, fwd, `{"jsonrpc":"2.0","id":6,"method":"ping"}`, "Content-Type", "application/json")
			if r.StatusCode != http.StatusAccepted {
				t.Fatalf("POST %s: %d %s", fwd, r.StatusCode, body)
			}
		})
	}
}
