package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestReverseBridgeFindsModernOnlyServer: with "protocol": "auto", a server of 2026-07-28 alone
// (it refuses initialize) is found by its server/discover, and a client of the session eras
// uses it through the reverse bridge: initialize answered from discover, a tool call with its
// id byte for byte and its progress, ping answered by the gateway.
func TestReverseBridgeFindsModernOnlyServer(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("s", testkit.FakeOptions{Modern: true, ModernOnly: true})))
	c := g.client("s")
	// The first sessions may reach the process before it refused the gateway's initialize.
	testkit.WaitFor(t, "a session of the reverse bridge", func() bool {
		r := c.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if r.Status != http.StatusOK || len(r.Msgs) != 1 || decode(t, r.Msgs[0]).Error != nil {
			return false
		}
		c.session, c.version = r.Header.Get("Mcp-Session-Id"), "2025-06-18"
		return strings.Contains(string(r.Msgs[0]), `"protocolVersion":"2025-06-18"`)
	})
	checkReverseSession(t, c)
}

// TestReverseBridgePinned: a dual-era server pinned to 2026-07-28 gets no initialize: its
// session-era clients are served by the reverse bridge from the first one, in either isolation
// mode (a session has nothing to isolate on a server without sessions: one process serves all).
func TestReverseBridgePinned(t *testing.T) {
	for _, isolation := range []config.Isolation{config.IsolationShared, config.IsolationSession} {
		t.Run(string(isolation), func(t *testing.T) {
			marker := "reverse-pinned-" + string(isolation)
			srv := fakeServer("s", testkit.FakeOptions{Modern: true, Marker: marker})
			srv.Protocol, srv.Isolation = config.ProtocolModern, isolation
			g := startGateway(t, newConfig(srv))
			c, d := g.client("s"), g.client("s")
			c.connect(t)
			d.connect(t)
			checkReverseSession(t, c)
			checkReverseSession(t, d)
			if n := len(testkit.Procs(marker)); n != 1 {
				t.Errorf("%d processes for two sessions, want 1", n)
			}
			// Each session holds a listen (the fake announces tools/list_changed) until it ends.
			for _, cl := range []*mcpClient{c, d} {
				if r := cl.do(t, cl.request(http.MethodDelete, ""), nil); r.Status != http.StatusNoContent && r.Status != http.StatusOK {
					t.Fatalf("DELETE: %d", r.Status)
				}
			}
			testkit.WaitFor(t, "nothing pending upstream after the sessions ended", func() bool { return g.pending("s") == 0 })
		})
	}
}

func checkReverseSession(t *testing.T, c *mcpClient) {
	t.Helper()
	r := c.post(t, callBody("7.50", "echo", map[string]string{"message": "through the bridge"}, `{"progressToken":"p1"}`))
	if r.Status != http.StatusOK {
		t.Fatalf("tools/call: status %d %s", r.Status, r.Body)
	}
	final := r.final(t)
	if string(final.ID) != "7.50" || !strings.Contains(toolText(t, final), "through the bridge") {
		t.Errorf("reply %s", r.Msgs[len(r.Msgs)-1])
	}
	progress := 0
	for _, m := range r.Msgs[:len(r.Msgs)-1] {
		if d := decode(t, m); d.Method == "notifications/progress" && strings.Contains(string(d.Params), `"progressToken":"p1"`) {
			progress++
		} else {
			t.Errorf("unexpected message %s", m)
		}
	}
	if progress == 0 {
		t.Error("no progress for the call")
	}
	if p := c.post(t, `{"jsonrpc":"2.0","id":"ping-1","method":"ping"}`); string(p.final(t).ID) != `"ping-1"` || p.final(t).Error != nil {
		t.Errorf("ping: %s", p.Msgs)
	}
	if s := c.post(t, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`); s.final(t).Error != nil {
		t.Errorf("logging/setLevel: %s", s.Msgs)
	}
}
