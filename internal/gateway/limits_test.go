package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestFairQueueAcrossSessions: with maxInFlight 1, a session with one call
// is served between the calls of a session that queued many, not after them.
func TestFairQueueAcrossSessions(t *testing.T) {
	s := fakeServer("fake", testkit.FakeOptions{})
	s.MaxInFlight = 1
	g := startGateway(t, newConfig(s))
	busy, other := g.client("fake"), g.client("fake")
	busy.connect(t)
	other.connect(t)

	var mu sync.Mutex
	var order []string
	call := func(c *mcpClient, name string, ms int) {
		r := c.post(t, callBody(`"`+name+`"`, "slow", map[string]int{"ms": ms}, ""))
		if len(r.Msgs) == 0 {
			return // cancelled: no reply
		}
		if m := r.final(t); m.Error != nil {
			t.Errorf("%s: %s", name, m.Error.Message)
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	// A call that holds the only slot until it is cancelled, so that the
	// queue is built while nothing moves, however slow the machine.
	wg.Go(func() { call(busy, "hold", 600000) })
	testkit.WaitFor(t, "the first call to hold the only slot", func() bool { return g.pending("fake") == 1 })
	for i := 1; i <= 5; i++ {
		wg.Go(func() { call(busy, fmt.Sprintf("busy-%d", i), 20) })
	}
	testkit.WaitFor(t, "busy's calls to queue", func() bool { return g.pending("fake") == 6 })
	wg.Go(func() { call(other, "other", 20) })
	testkit.WaitFor(t, "other's call to queue", func() bool { return g.pending("fake") == 7 })
	if r := busy.post(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"hold"}}`); r.Status != http.StatusAccepted {
		t.Fatalf("cancel: %d", r.Status)
	}
	wg.Wait()
	// Round robin: one of busy's queued calls, then other's. FIFO would put
	// other's last.
	if len(order) != 6 || order[1] != "other" {
		t.Fatalf("completion order %v: the other session waited behind the busy one", order)
	}
}

// TestPingAnsweredByGateway: ping never reaches the server and keeps its id.
func TestPingAnsweredByGateway(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	c := g.client("fake")
	c.connect(t)
	m := c.post(t, `{"jsonrpc":"2.0","id":"p-1","method":"ping"}`).final(t)
	if string(m.ID) != `"p-1"` || m.Error != nil || string(m.Result) != "{}" {
		t.Fatalf("ping reply %+v", m)
	}
}

// TestBigReplies: a reply far over a pipe buffer arrives whole; one over the
// line limit fails its request at once instead of hanging.
func TestBigReplies(t *testing.T) {
	s := fakeServer("fake", testkit.FakeOptions{})
	s.MaxLineBytes = 1 << 20
	g := startGateway(t, newConfig(s))
	c := g.client("fake")
	c.connect(t)
	if got := toolText(t, c.post(t, callBody("1", "big", map[string]int{"bytes": 900 << 10}, "")).final(t)); len(got) != 900<<10 || strings.Trim(got, "x") != "" {
		t.Fatalf("900 KiB reply came back as %d bytes", len(got))
	}
	m := c.post(t, callBody("2", "big", map[string]int{"bytes": 2 << 20}, "")).final(t)
	if m.Error == nil || !strings.Contains(m.Error.Message, "line limit") {
		t.Fatalf("oversized reply: %+v", m)
	}
	if got := toolText(t, c.post(t, callBody("3", "echo", map[string]string{"message": "still fine"}, "")).final(t)); got != "still fine" {
		t.Fatalf("after an oversized reply: %q", got)
	}
}

// TestGarbageAndEarlyNotificationsFromServer: a server that writes a non-JSON
// line and a list_changed before its initialize reply still works.
func TestGarbageAndEarlyNotificationsFromServer(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{GarbageBeforeInit: true, ListChangedBeforeInit: true})))
	c := g.client("fake")
	c.connect(t)
	if got := toolText(t, c.post(t, callBody("1", "echo", map[string]string{"message": "ok"}, "")).final(t)); got != "ok" {
		t.Fatalf("echo: %q", got)
	}
	if r := c.do(t, c.request(http.MethodDelete, ""), nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", r.Status)
	}
}

// TestMaxProcessesGives503: in session mode, a session beyond the server's
// maxProcesses gets 503 with Retry-After, and a slot frees when a session
// ends.
func TestMaxProcessesGives503(t *testing.T) {
	s := fakeServer("iso", testkit.FakeOptions{})
	s.Isolation = config.IsolationSession
	s.MaxProcesses = 1
	g := startGateway(t, newConfig(s))
	first := g.client("iso")
	first.connect(t)
	second := g.client("iso")
	r := second.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a session over maxProcesses: status %d, Retry-After %q, body %s; want 503 with Retry-After",
			r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	if r := first.do(t, first.request(http.MethodDelete, ""), nil); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: status %d", r.Status)
	}
	testkit.WaitFor(t, "a process slot to free", func() bool {
		c := g.client("iso")
		r := c.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		return r.Status == http.StatusOK
	})
}
