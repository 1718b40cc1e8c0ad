package front

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Credentials of the test principals (fakeAuth).
var (
	asAlice    = []string{"Authorization", "Bearer alice"}
	asBob      = []string{"Authorization", "Bearer bob"}
	asAliceKey = []string{"Authorization", "Bearer alice-key"} // another principal of the same name
)

func with(hdr []string, more ...string) []string { return append(slices.Clone(hdr), more...) }

// A session is its principal's: another principal's credentials on it, on
// every path (POST, GET stream, Last-Event-ID resumption, DELETE), get the
// very answer an unknown session gets, and change nothing; none get 401.
// The owner's session keeps working throughout.
func TestSessionBoundToPrincipal(t *testing.T) {
	b := newFakeBackend()
	b.version = "2025-11-25"
	_, srv := testServer(t, b, Config{Auth: newFakeAuth()})
	resp, body := do(t, srv, http.MethodPost, mcpPath, initBody, asAlice...)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	session := func(id string, cred []string, more ...string) []string {
		return with(cred, append([]string{"Mcp-Session-Id", id, "Mcp-Protocol-Version", "2025-11-25"}, more...)...)
	}
	// A POST whose reply is an SSE stream: its event id is resumable.
	resp, body = do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":7,"method":"progress","params":{}}`, session(sid, asAlice)...)
	last := ""
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, "id: "); ok && last == "" {
			last = v
		}
	}
	if resp.StatusCode != http.StatusOK || last == "" {
		t.Fatalf("progress POST: %d %q", resp.StatusCode, body)
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	sse := []string{"Accept", "text/event-stream"}
	attempts := []struct {
		what, method, body string
		more               []string
	}{
		{"POST", http.MethodPost, ping, nil},
		{"GET stream", http.MethodGet, "", sse},
		{"GET resume", http.MethodGet, "", with(sse, "Last-Event-ID", last)},
		{"DELETE", http.MethodDelete, "", nil},
	}
	for _, at := range attempts {
		_, unknown := do(t, srv, at.method, mcpPath, at.body, session("unknown-session", asBob, at.more...)...)
		for _, intruder := range [][]string{asBob, asAliceKey} {
			resp, body := do(t, srv, at.method, mcpPath, at.body, session(sid, intruder, at.more...)...)
			if resp.StatusCode != http.StatusNotFound || body != unknown {
				t.Errorf("%s by %s: %d %q, want 404 %q as for an unknown session", at.what, intruder[1], resp.StatusCode, body, unknown)
			}
		}
		if resp, _ := do(t, srv, at.method, mcpPath, at.body, session(sid, nil, at.more...)...); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without credentials: %d, want 401", at.what, resp.StatusCode)
		}
	}
	if n := b.closes.Load(); n != 0 {
		t.Fatalf("foreign DELETEs closed %d sessions", n)
	}
	// The owner's session is intact: requests, resumption, DELETE.
	if resp, body := do(t, srv, http.MethodPost, mcpPath, ping, session(sid, asAlice)...); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":1`) {
		t.Errorf("alice's POST: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, srv, http.MethodGet, mcpPath, "", session(sid, asAlice, with(sse, "Last-Event-ID", last)...)...); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"id":7`) {
		t.Errorf("alice's resumption: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, srv, http.MethodDelete, mcpPath, "", session(sid, asAlice)...); resp.StatusCode != http.StatusNoContent || b.closes.Load() != 1 {
		t.Errorf("alice's DELETE: %d, %d closed", resp.StatusCode, b.closes.Load())
	}
}

// openLegacyAs opens a legacy SSE session at path with headers hdr and
// returns its endpoint URL and the data of its message events.
func openLegacyAs(t *testing.T, srv *httptest.Server, path string, hdr ...string) (string, <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
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
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	data := make(chan string, 64)
	go func() {
		defer close(data)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data <- d
			}
		}
	}()
	return testkit.Receive(t, data, "the endpoint event"), data
}

// A legacy session is its principal's: another's POSTs to its /messages
// get 404, and another's Last-Event-ID opens a new session rather than
// re-attaching; the owner's stream and POSTs go on.
func TestLegacySessionBoundToPrincipal(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Auth: newFakeAuth(), LegacyGrace: time.Minute})
	endpoint, events := openLegacyAs(t, srv, "/servers/x/sse", asAlice...)
	sid := endpoint[strings.Index(endpoint, "sessionId=")+len("sessionId="):]
	ping := `{"jsonrpc":"2.0","id":3,"method":"ping"}`
	_, unknown := do(t, srv, http.MethodPost, "/servers/x/messages?sessionId=unknown", ping, asBob...)
	for _, intruder := range [][]string{asBob, asAliceKey} {
		resp, body := do(t, srv, http.MethodPost, endpoint, ping, intruder...)
		if resp.StatusCode != http.StatusNotFound || body != unknown {
			t.Errorf("POST /messages by %s: %d %q, want 404 %q", intruder[1], resp.StatusCode, body, unknown)
		}
	}
	if resp, _ := do(t, srv, http.MethodPost, endpoint, ping); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /messages without credentials: %d", resp.StatusCode)
	}
	// Bob naming alice's session in Last-Event-ID gets a session of his own.
	other, _ := openLegacyAs(t, srv, "/servers/x/sse", with(asBob, "Last-Event-ID", sid+".0")...)
	if strings.Contains(other, sid) || b.opens.Load() != 2 {
		t.Errorf("bob's reattach to alice's session: endpoint %q, %d opens", other, b.opens.Load())
	}
	// Nor may the Streamable HTTP paths reach it.
	if resp, _ := do(t, srv, http.MethodGet, mcpPath, "", with(asBob, "Mcp-Session-Id", sid, "Accept", "text/event-stream")...); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /mcp on alice's legacy session: %d", resp.StatusCode)
	}
	if resp, body := do(t, srv, http.MethodPost, endpoint, ping, asAlice...); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("alice's POST: %d %s", resp.StatusCode, body)
	}
	if got := testkit.Receive(t, events, "alice's reply"); !strings.Contains(got, `"id":3`) {
		t.Errorf("alice's stream got %s", got)
	}
}

// The principal travels in the context of everything a request reaches:
// Open, OpenStateless and each Handle, in every era.
func TestPrincipalInContext(t *testing.T) {
	seen := &seenPrincipals{}
	sb := &statelessBackend{newFakeBackend(), testInit}
	spy := spyBackend{sb, seen}
	_, srv := routedServer(t, Config{Backends: map[string]conn.Backend{"x": spy}, Auth: newFakeAuth()})

	resp, body := do(t, srv, http.MethodPost, mcpPath, initBody, asAlice...)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, with(asAlice, "Mcp-Session-Id", sid)...)
	resp, body = modernPost(t, srv.URL, modernBody("2", "tools/list", ""), asAliceKey...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stateless: %d %s", resp.StatusCode, body)
	}
	endpoint, events := openLegacyAs(t, srv, "/servers/x/sse", asBob...)
	do(t, srv, http.MethodPost, endpoint, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, asBob...)
	testkit.Receive(t, events, "the legacy reply")
	want := []string{
		"open=token:alice", "handle initialize=token:alice", "handle tools/list=token:alice",
		"openStateless=key:alice", "handle tools/list=key:alice",
		"open=token:bob", "handle ping=token:bob",
	}
	if got := seen.list(); !slices.Equal(got, want) {
		t.Errorf("principals seen:\n%q\nwant\n%q", got, want)
	}
}

// A requestState is its principal's: another's retry with it (another
// subject, or the same name as another kind) is refused as not valid and
// leaves the request parked; the owner's retry completes it.
func TestRequestStateBoundToPrincipal(t *testing.T) {
	b := newAtkBackend(mrtrScript)
	h, url := atkServer(t, b, Config{Auth: newFakeAuth()})
	ctx, cancel := ctxT(10 * time.Second)
	defer cancel()
	ir := asInputRequired(t, atkPost(ctx, url, atkBody("1", "tools/call", "sample", ""), asAlice...))
	retry := atkBody("2", "tools/call", "sample", inputAnswers(ir))
	for _, intruder := range [][]string{asBob, asAliceKey} {
		r := atkPost(ctx, url, retry, intruder...)
		if r.Status != http.StatusBadRequest || len(r.Msgs) != 1 || !strings.Contains(r.Msgs[0], "requestState is not valid") {
			t.Errorf("retry by %s: %d %q, want 400 requestState is not valid", intruder[1], r.Status, r.Msgs)
		}
	}
	if r := atkPost(ctx, url, retry); r.Status != http.StatusUnauthorized {
		t.Errorf("retry without credentials: %d", r.Status)
	}
	if n := parkedCount(h); n != 1 {
		t.Fatalf("%d requests parked after the refused retries, want 1", n)
	}
	r := atkPost(ctx, url, retry, asAlice...)
	if r.Status != http.StatusOK || len(r.Msgs) == 0 || !strings.Contains(r.Msgs[len(r.Msgs)-1], "ans-") || !strings.Contains(r.Msgs[len(r.Msgs)-1], `"id":2`) {
		t.Fatalf("alice's retry: %d %q", r.Status, r.Msgs)
	}
}
