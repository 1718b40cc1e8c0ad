package front

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// checkOverloaded checks a 503 with Retry-After and a JSON-RPC error of
// id saying the gateway is overloaded.
func checkOverloaded(t *testing.T, resp *http.Response, body, id string) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503: %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Retry-After"); got == "" {
		t.Errorf("no Retry-After")
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
	if string(m.ID) != id || m.Error.Code == 0 || !strings.Contains(m.Error.Message, "overloaded") {
		t.Errorf("body %s: want id %s and an error saying the gateway is overloaded", body, id)
	}
}

// The global cap counts the POSTs of every principal: with two held by
// two principals, any further request is refused with 503 (a session
// request, a batch with id null, a stateless one), while a POST of
// notifications only passes; once the held ones are answered, requests
// are admitted again.
func TestGlobalCapAcrossPrincipals(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{Auth: newFakeAuth(), Limits: &Limits{MaxInFlightTotal: 2}})
	type user struct {
		hdr  []string
		conn *fakeConn
		held <-chan string
	}
	users := []*user{{hdr: []string{"Authorization", "Bearer alice"}}, {hdr: []string{"Authorization", "Bearer bob"}}}
	for _, u := range users {
		resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, u.hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		u.hdr = append(u.hdr, "Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version", "2025-06-18")
		u.conn = testkit.Receive(t, b.conns, "the session's conn")
	}
	for _, u := range users {
		out := make(chan string, 1)
		go func() {
			resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"held","method":"hold"}`, u.hdr...)
			out <- resp.Status + " " + body
		}()
		u.held = out
		testkit.Receive(t, u.conn.held, "the held request")
	}

	alice := users[0].hdr
	resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":77,"method":"tools/list"}`, alice...)
	checkOverloaded(t, resp, body, "77")
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1 (no request has ended yet)", got)
	}
	resp, body = do(t, srv, http.MethodPost, mcpPath, `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, alice...)
	checkOverloaded(t, resp, body, "null")
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	resp, body = do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"s1","method":"tools/list","params":{`+meta+`}}`,
		"Authorization", "Bearer bob", "MCP-Protocol-Version", "2026-07-28")
	checkOverloaded(t, resp, body, `"s1"`)
	if resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`, alice...); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a notification at the cap: %d %s", resp.StatusCode, body)
	}

	for _, u := range users {
		u.conn.release()
		if got := testkit.Receive(t, u.held, "the held reply"); !strings.HasPrefix(got, "200") || !strings.Contains(got, "released") {
			t.Fatalf("held request: %s", got)
		}
	}
	// The handlers release their slots as they return, just after the
	// bodies arrive: wait for that, not for a time.
	testkit.WaitFor(t, "the slots to be released", func() bool {
		resp, _ := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":78,"method":"tools/list"}`, alice...)
		return resp.StatusCode == http.StatusOK
	})
}

// Under real concurrency the cap is never exceeded, and every slot taken
// is given back.
func TestOverloadConcurrentAdmit(t *testing.T) {
	o := &overload{max: 3}
	var inside, peak atomic.Int64
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 500 {
				release, ref := o.admit(time.Now)
				if ref != nil {
					if ref.status != http.StatusServiceUnavailable || ref.auditOutcome() != outcomeOverloaded || ref.retry < time.Second {
						t.Errorf("refusal %+v", ref)
					}
					refused.Add(1)
					continue
				}
				n := inside.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				inside.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 3 {
		t.Errorf("%d admitted at once, cap 3", p)
	}
	if n := o.inFlight.Load(); n != 0 {
		t.Errorf("%d slots still taken", n)
	}
	t.Logf("%d of 8000 refused", refused.Load())
}

// Retry-After is the expected wait for the first of the requests in
// flight to end: average/(n+1), within [1 s, 30 s].
func TestOverloadRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		avg  time.Duration
		n    int64
		want time.Duration
	}{
		{0, 5, time.Second},                           // nothing ended yet
		{50 * time.Millisecond, 100, time.Second},     // short calls: the floor
		{60 * time.Second, 9, 6 * time.Second},        // minute-long calls, 9 in flight
		{10 * time.Minute, 1, overloadRetryMax},       // the ceiling
		{90 * time.Second, 2, 30 * time.Second},       // exactly the ceiling
		{3 * time.Second, 1, 1500 * time.Millisecond}, // Retry-After rounds it up to 2
	} {
		o := &overload{max: tt.n}
		o.avg.Store(int64(tt.avg))
		if got := o.retryAfter(tt.n); got != tt.want {
			t.Errorf("avg %v, %d in flight: %v, want %v", tt.avg, tt.n, got, tt.want)
		}
	}
	// The average follows the durations of the POSTs that ended.
	clock := newTestClock()
	o := &overload{max: 1}
	release, _ := o.admit(clock.Now)
	clock.advance(8 * time.Second)
	release()
	if got := time.Duration(o.avg.Load()); got != 8*time.Second {
		t.Errorf("average %v after one POST of 8s", got)
	}
	release, _ = o.admit(clock.Now)
	if _, ref := o.admit(clock.Now); ref == nil || retryAfter(ref.retry) != "4" {
		t.Errorf("refusal %+v, want Retry-After 4 (8s / 2)", ref)
	}
	release()
}
