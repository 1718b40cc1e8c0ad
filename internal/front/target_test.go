package front

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// routedServer serves a Handler for cfg's own Backends and Endpoints.
func routedServer(t *testing.T, cfg Config) (*Handler, *httptest.Server) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return h, srv
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`

// initAt initializes a session at path (with host, if not "") and returns
// its id.
func initAt(t *testing.T, srv *httptest.Server, path, host string) string {
	t.Helper()
	var hdr []string
	if host != "" {
		hdr = []string{"Host", host}
	}
	resp, body := doHost(t, srv, http.MethodPost, path, initBody, hdr...)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize at %s: %d %s", path, resp.StatusCode, body)
	}
	return id
}

// doHost is do, with a "Host" pair in hdr setting the request's Host.
func doHost(t *testing.T, srv *httptest.Server, method, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var host string
	var rest []string
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			host = hdr[i+1]
		} else {
			rest = append(rest, hdr[i], hdr[i+1])
		}
	}
	if host == "" {
		return do(t, srv, method, path, body, rest...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
	req.Host = host
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for i := 0; i+1 < len(rest); i += 2 {
		req.Header.Set(rest[i], rest[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return resp, strings.TrimSpace(b.String())
}

// A server and an endpoint may share a name: each URL opens its sessions on
// its own backend, and a session is usable only on its own URLs, whatever
// the request (POST, GET, DELETE).
func TestEndpointSessionsStayOnTheirURLs(t *testing.T) {
	server, endpoint, all := newFakeBackend(), newFakeBackend(), newFakeBackend()
	_, srv := routedServer(t, Config{
		Backends:  map[string]conn.Backend{"x": server},
		Endpoints: map[string]conn.Backend{"x": endpoint, "all": all},
	})
	paths := []string{"/servers/x/mcp", "/endpoints/x/mcp", "/mcp"}
	backends := []*fakeBackend{server, endpoint, all}
	ids := make([]string, len(paths))
	for i, p := range paths {
		ids[i] = initAt(t, srv, p, "")
		for j, b := range backends {
			want := int32(0)
			if j <= i {
				want = 1
			}
			if got := b.opens.Load(); got != want {
				t.Fatalf("after initialize at %s: backend %d opened %d sessions, want %d", p, j, got, want)
			}
		}
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for i, id := range ids {
		for j, p := range paths {
			resp, body := do(t, srv, http.MethodPost, p, ping, "Mcp-Session-Id", id)
			if i == j {
				if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":1`) {
					t.Errorf("session of %s on its own URL: %d %s", paths[i], resp.StatusCode, body)
				}
				continue
			}
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "session not found") {
				t.Errorf("session of %s POSTed to %s: %d %s, want 404", paths[i], p, resp.StatusCode, body)
			}
			resp, body = do(t, srv, http.MethodGet, p, "", "Mcp-Session-Id", id, "Accept", "text/event-stream")
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("session of %s: GET at %s: %d %s, want 404", paths[i], p, resp.StatusCode, body)
			}
			resp, body = do(t, srv, http.MethodDelete, p, "", "Mcp-Session-Id", id)
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("session of %s: DELETE at %s: %d %s, want 404", paths[i], p, resp.StatusCode, body)
			}
		}
	}
	// The foreign DELETEs ended nothing; the session's own does.
	for i, b := range backends {
		if n := b.closes.Load(); n != 0 {
			t.Fatalf("backend %d: %d sessions closed by foreign DELETEs", i, n)
		}
		if resp, _ := do(t, srv, http.MethodDelete, paths[i], "", "Mcp-Session-Id", ids[i]); resp.StatusCode != http.StatusNoContent {
			t.Errorf("DELETE at %s: %d", paths[i], resp.StatusCode)
		}
		if n := b.closes.Load(); n != 1 {
			t.Errorf("backend %d: %d sessions closed, want 1", i, n)
		}
	}
}

func TestEndpointErrorsNameTheEndpoint(t *testing.T) {
	down := newFakeBackend()
	down.openErr = errors.New(`mcpgate: critical member "memory" is starting`)
	_, srv := routedServer(t, Config{
		Backends:  map[string]conn.Backend{"x": newFakeBackend()},
		Endpoints: map[string]conn.Backend{"down": down},
	})
	resp, body := do(t, srv, http.MethodPost, "/endpoints/nope/mcp", initBody)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `unknown endpoint \"nope\"`) {
		t.Errorf("unknown endpoint: %d %s", resp.StatusCode, body)
	}
	// A server's name is not an endpoint's.
	resp, body = do(t, srv, http.MethodPost, "/endpoints/x/mcp", initBody)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `unknown endpoint \"x\"`) {
		t.Errorf("a server's name under /endpoints: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, srv, http.MethodPost, "/servers/down/mcp", initBody)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `unknown server \"down\"`) {
		t.Errorf("an endpoint's name under /servers: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, srv, http.MethodPost, "/endpoints/down/mcp", initBody)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `endpoint down unavailable: critical member \"memory\" is starting`) {
		t.Errorf("endpoint that cannot open: %d %s", resp.StatusCode, body)
	}
	// A stateless request to an endpoint that serves sessions only.
	ctx, cancel := ctxT(10 * time.Second)
	defer cancel()
	r := atkPostTo(ctx, srv.URL, "/endpoints/down/mcp", atkBody("1", "tools/list", "", ""))
	if r.Status != http.StatusBadRequest || len(r.Msgs) != 1 || !strings.Contains(r.Msgs[0], "endpoint down serves sessions only") {
		t.Errorf("stateless request to a sessions-only endpoint: %d %q", r.Status, r.Msgs)
	}
	// Without a default endpoint, /mcp serves nothing.
	resp, body = do(t, srv, http.MethodPost, "/mcp", initBody)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "endpoints at /endpoints/{name}/mcp") {
		t.Errorf("/mcp without the default endpoint: %d %s", resp.StatusCode, body)
	}
}

// legacyStream is an open legacy SSE stream: its endpoint URL and the
// data of its message events.
type legacyStream struct {
	endpoint string
	data     chan string
}

// openLegacy opens a legacy SSE session at path (with host, if not "").
func openLegacyAt(t *testing.T, srv *httptest.Server, path, host string) *legacyStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	if host != "" {
		req.Host = host
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
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	l := &legacyStream{data: make(chan string, 64)}
	events := make(chan [2]string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var event string
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				events <- [2]string{event, d}
				event = ""
			}
		}
	}()
	first := testkit.Receive(t, events, "the endpoint event")
	if first[0] != "endpoint" {
		t.Fatalf("first event %q, want endpoint", first)
	}
	l.endpoint = first[1]
	go func() {
		for ev := range events {
			l.data <- ev[1]
		}
	}()
	return l
}

// A legacy session opened on an endpoint is told its endpoint's own
// /messages URL, takes messages only there, and answers on its stream.
func TestEndpointLegacySSE(t *testing.T) {
	server, endpoint, all := newFakeBackend(), newFakeBackend(), newFakeBackend()
	_, srv := routedServer(t, Config{
		Backends:  map[string]conn.Backend{"x": server},
		Endpoints: map[string]conn.Backend{"x": endpoint, "all": all},
	})
	for _, tc := range []struct {
		path, messages string
		backend        *fakeBackend
	}{
		{"/servers/x/sse", "/servers/x/messages", server},
		{"/endpoints/x/sse", "/endpoints/x/messages", endpoint},
		{"/endpoints/x/mcp", "/endpoints/x/messages", endpoint}, // a GET falling back on the same URL
		{"/sse", "/messages", all},
	} {
		t.Run(tc.path, func(t *testing.T) {
			opens := tc.backend.opens.Load()
			l := openLegacyAt(t, srv, tc.path, "")
			path, query, _ := strings.Cut(l.endpoint, "?")
			if path != tc.messages || !strings.HasPrefix(query, "sessionId=") {
				t.Fatalf("endpoint event %q, want %s?sessionId=...", l.endpoint, tc.messages)
			}
			if tc.backend.opens.Load() != opens+1 {
				t.Fatalf("the session was not opened on its own backend")
			}
			// Every other target's /messages refuses the session.
			for _, other := range []string{"/servers/x/messages", "/endpoints/x/messages", "/messages"} {
				if other == tc.messages {
					continue
				}
				resp, body := do(t, srv, http.MethodPost, other+"?"+query, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
				if resp.StatusCode != http.StatusNotFound {
					t.Errorf("POST to %s: %d %s, want 404", other, resp.StatusCode, body)
				}
			}
			resp, body := do(t, srv, http.MethodPost, l.endpoint, `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST to %s: %d %s", l.endpoint, resp.StatusCode, body)
			}
			if got := testkit.Receive(t, l.data, "the reply"); !strings.Contains(got, `"id":6`) {
				t.Errorf("reply %s", got)
			}
		})
	}
}

// A legacy session re-attaches (Last-Event-ID) only on its own target: the
// same id on another target's URL opens a new session there.
func TestEndpointLegacyReattachStaysOnTarget(t *testing.T) {
	server, endpoint := newFakeBackend(), newFakeBackend()
	h, srv := routedServer(t, Config{
		Backends:    map[string]conn.Backend{"x": server},
		Endpoints:   map[string]conn.Backend{"x": endpoint},
		LegacyGrace: time.Minute,
	})
	l := openLegacyAt(t, srv, "/servers/x/sse", "")
	sid := l.endpoint[strings.Index(l.endpoint, "sessionId=")+len("sessionId="):]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/endpoints/x/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", sid+".0")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	for !strings.HasPrefix(line, "data: ") && err == nil {
		line, err = br.ReadString('\n')
	}
	if resp.StatusCode != http.StatusOK || strings.Contains(line, sid) || !strings.HasPrefix(line, "data: /endpoints/x/messages?sessionId=") {
		t.Fatalf("Last-Event-ID of a server's session on the endpoint: %d %q", resp.StatusCode, line)
	}
	if endpoint.opens.Load() != 1 || server.opens.Load() != 1 || h.Sessions() != 2 {
		t.Fatalf("opens: server %d endpoint %d, sessions %d; want a new session on the endpoint", server.opens.Load(), endpoint.opens.Load(), h.Sessions())
	}
}

// Host routing: a subdomain names a server, or an endpoint when no server
// has that name (servers first); the legacy endpoint URL stays on the host.
func TestEndpointHostRouting(t *testing.T) {
	server, shadowed, endpoint := newFakeBackend(), newFakeBackend(), newFakeBackend()
	_, srv := routedServer(t, Config{
		Backends:   map[string]conn.Backend{"x": server},
		Endpoints:  map[string]conn.Backend{"x": shadowed, "team": endpoint},
		HostDomain: "mcp.test",
	})
	sx := initAt(t, srv, "/mcp", "x.mcp.test")
	if server.opens.Load() != 1 || shadowed.opens.Load() != 0 {
		t.Fatalf("x.mcp.test opened on the endpoint, not the server")
	}
	st := initAt(t, srv, "/mcp", "team.mcp.test:8080")
	if endpoint.opens.Load() != 1 {
		t.Fatalf("team.mcp.test did not open on the endpoint")
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	// Each session works on its host and on its path, and nowhere else.
	for _, tc := range []struct {
		sid, path, host string
		status          int
	}{
		{sx, "/mcp", "x.mcp.test", http.StatusOK},
		{sx, "/servers/x/mcp", "", http.StatusOK},
		{sx, "/endpoints/x/mcp", "", http.StatusNotFound},
		{sx, "/mcp", "team.mcp.test", http.StatusNotFound},
		{st, "/mcp", "team.mcp.test", http.StatusOK},
		{st, "/endpoints/team/mcp", "", http.StatusOK},
		{st, "/mcp", "x.mcp.test", http.StatusNotFound},
	} {
		hdr := []string{"Mcp-Session-Id", tc.sid}
		if tc.host != "" {
			hdr = append(hdr, "Host", tc.host)
		}
		if resp, body := doHost(t, srv, http.MethodPost, tc.path, ping, hdr...); resp.StatusCode != tc.status {
			t.Errorf("POST %s host %q: %d %s, want %d", tc.path, tc.host, resp.StatusCode, body, tc.status)
		}
	}
	resp, body := doHost(t, srv, http.MethodPost, "/mcp", initBody, "Host", "nope.mcp.test")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `unknown server or endpoint \"nope\"`) {
		t.Errorf("unknown subdomain: %d %s", resp.StatusCode, body)
	}
	l := openLegacyAt(t, srv, "/sse", "team.mcp.test")
	if !strings.HasPrefix(l.endpoint, "/messages?sessionId=") {
		t.Fatalf("host-routed endpoint's endpoint event %q", l.endpoint)
	}
	if resp, body := doHost(t, srv, http.MethodPost, l.endpoint, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, "Host", "team.mcp.test"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST to the host-routed endpoint's /messages: %d %s", resp.StatusCode, body)
	}
	if got := testkit.Receive(t, l.data, "the reply"); !strings.Contains(got, `"id":2`) {
		t.Errorf("reply %s", got)
	}
	if resp, _ := doHost(t, srv, http.MethodPost, l.endpoint, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, "Host", "x.mcp.test"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the endpoint's legacy session on the server's host: %d, want 404", resp.StatusCode)
	}
}

// A stateless request answered input_required is retried on its own URL:
// its requestState does not open on another target's URL (which could be
// an endpoint of the same name), and stays valid for its own.
func TestEndpointStatelessRetryStaysOnTarget(t *testing.T) {
	server, endpoint := newAtkBackend(mrtrScript), newAtkBackend(mrtrScript)
	h, srv := routedServer(t, Config{
		Backends:  map[string]conn.Backend{"x": server},
		Endpoints: map[string]conn.Backend{"x": endpoint},
		InputWait: time.Minute,
	})
	ctx, cancel := ctxT(10 * time.Second)
	defer cancel()
	ir := asInputRequired(t, atkPostTo(ctx, srv.URL, "/servers/x/mcp", atkBody("1", "tools/call", "sample", "")))
	retry := atkBody("2", "tools/call", "sample", inputAnswers(ir))
	r := atkPostTo(ctx, srv.URL, "/endpoints/x/mcp", retry)
	if r.Status != http.StatusBadRequest || len(r.Msgs) != 1 || !strings.Contains(r.Msgs[0], "requestState is not valid") {
		t.Fatalf("retry on the endpoint of the same name: %d %q", r.Status, r.Msgs)
	}
	if n := parkedCount(h); n != 1 {
		t.Fatalf("%d requests parked after the foreign retry, want the one still waiting", n)
	}
	r = atkPostTo(ctx, srv.URL, "/servers/x/mcp", retry)
	if r.Status != http.StatusOK || len(r.Msgs) == 0 || !strings.Contains(r.Msgs[len(r.Msgs)-1], `"id":2`) || !strings.Contains(r.Msgs[len(r.Msgs)-1], "ans-") {
		t.Fatalf("retry on its own URL: %d %q", r.Status, r.Msgs)
	}
	if n := waitSessions(h, 0, 30*time.Second); n != 0 { // below the 1 min InputWait
		t.Errorf("%d sessions left", n)
	}
}
