package front

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// testClock is a clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// checkRefused checks a 429 with Retry-After retry and a JSON-RPC error
// whose id is id and message has want.
func checkRefused(t *testing.T, resp *http.Response, body, retry, id, want string) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Retry-After"); got != retry {
		t.Errorf("Retry-After %q, want %q", got, retry)
	}
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if string(m.ID) != id || m.Error.Code == 0 || !strings.Contains(m.Error.Message, want) {
		t.Errorf("body %s: want id %s and an error saying %q", body, id, want)
	}
}

func TestLimitRateRetryAfter(t *testing.T) {
	clock := newTestClock()
	// 0.4 per second, burst 1: after one request the next token is 2.5 s
	// away, which Retry-After rounds up to 3.
	_, srv := testServer(t, newFakeBackend(), Config{Limits: &limits.Config{RequestsPerSecond: 0.4, Burst: 1, Now: clock.Now}})
	sid := initSession(t, srv)
	hdr := []string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"}
	resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, hdr...)
	checkRefused(t, resp, body, "3", "7", "rate limit")
	clock.advance(2 * time.Second)
	resp, body = do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"s","method":"tools/list"}`, hdr...)
	checkRefused(t, resp, body, "1", `"s"`, "rate limit") // 0.5 s left: rounded up
	clock.advance(500 * time.Millisecond)
	if resp, body = do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`, hdr...); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the delay: %d %s", resp.StatusCode, body)
	}
	// A refused request took no token: exactly one more after 2.5 s.
	clock.advance(2500 * time.Millisecond)
	if resp, body = do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, hdr...); resp.StatusCode != http.StatusOK {
		t.Fatalf("after another 2.5 s: %d %s", resp.StatusCode, body)
	}
	// A batch-less notification counts too, and its refusal has id null.
	resp, body = do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr...)
	checkRefused(t, resp, body, "3", "null", "rate limit")
}

func TestLimitRatePerPrincipal(t *testing.T) {
	clock := newTestClock()
	_, srv := testServer(t, newFakeBackend(), Config{Auth: newFakeAuth(), Limits: &limits.Config{RequestsPerSecond: 1, Now: clock.Now}})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	for _, who := range []string{"alice", "bob", "alice-key"} {
		if resp, body := do(t, srv, http.MethodPost, mcpPath, init, "Authorization", "Bearer "+who); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", who, resp.StatusCode, body)
		}
	}
	resp, body := do(t, srv, http.MethodPost, mcpPath, init, "Authorization", "Bearer alice")
	checkRefused(t, resp, body, "1", "1", "rate limit")
}

func TestLimitInFlight(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Limits: &limits.Config{MaxInFlight: 1}})
	sid := initSession(t, srv)
	conn := testkit.Receive(t, b.conns, "the session's connection")
	held := postAsync(t, srv, sid, "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"hold"}`)
	testkit.Receive(t, conn.held, "the request to reach the server")
	hdr := []string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"}
	resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, hdr...)
	checkRefused(t, resp, body, "1", "2", "in flight")
	conn.release()
	if got := testkit.Receive(t, held, "the held reply"); !strings.Contains(got, "released") {
		t.Fatalf("held request: %s", got)
	}
	if resp, body = do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, hdr...); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the release: %d %s", resp.StatusCode, body)
	}
}

func TestLimitSessions(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Auth: newFakeAuth(), Limits: &limits.Config{MaxSessions: 1}})
	init := `{"jsonrpc":"2.0","id":4,"method":"initialize","params":{}}`
	resp, body := do(t, srv, http.MethodPost, mcpPath, init, "Authorization", "Bearer alice")
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("first session: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, srv, http.MethodPost, mcpPath, init, "Authorization", "Bearer alice")
	checkRefused(t, resp, body, "5", "null", "too many sessions")
	// A legacy SSE session counts as well.
	resp, body = do(t, srv, http.MethodGet, "/servers/x/sse", "", "Authorization", "Bearer alice", "Accept", "text/event-stream")
	checkRefused(t, resp, body, "5", "null", "too many sessions")
	if opens := b.opens.Load(); opens != 1 {
		t.Errorf("%d sessions opened upstream, want 1", opens)
	}
	// Another principal has sessions of its own.
	if resp, body = do(t, srv, http.MethodPost, mcpPath, init, "Authorization", "Bearer bob"); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob: %d %s", resp.StatusCode, body)
	}
	// Once the session is gone, another may be opened.
	if resp, body = do(t, srv, http.MethodDelete, mcpPath, "", "Authorization", "Bearer alice", "Mcp-Session-Id", sid); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	if resp, body = do(t, srv, http.MethodPost, mcpPath, init, "Authorization", "Bearer alice"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after DELETE: %d %s", resp.StatusCode, body)
	}
}

func TestLimitToolRate(t *testing.T) {
	clock := newTestClock()
	_, srv := testServer(t, newFakeBackend(), Config{Auth: newFakeAuth(), Limits: &limits.Config{ToolsPerSecond: 0.5, Now: clock.Now}})
	session := func(who string) []string {
		resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, "Authorization", "Bearer "+who)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		return []string{"Authorization", "Bearer " + who, "Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version", "2025-06-18"}
	}
	alice, bob := session("alice"), session("bob")
	call := func(hdr []string, id, tool string) (*http.Response, string) {
		return do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}}`, hdr...)
	}
	if resp, body := call(alice, "1", "echo"); resp.StatusCode != http.StatusOK {
		t.Fatalf("first call: %d %s", resp.StatusCode, body)
	}
	resp, body := call(alice, "2", "echo")
	checkRefused(t, resp, body, "2", "2", `tool "echo"`)
	for _, c := range []struct {
		hdr  []string
		tool string
	}{{alice, "add"}, {bob, "echo"}} {
		if resp, body := call(c.hdr, "3", c.tool); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", c.tool, resp.StatusCode, body)
		}
	}
	// Other methods are not counted.
	if resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, alice...); resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/list: %d %s", resp.StatusCode, body)
	}
	clock.advance(2 * time.Second)
	if resp, body := call(alice, "5", "echo"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after 2 s: %d %s", resp.StatusCode, body)
	}
}
