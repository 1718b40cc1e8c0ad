package gateway

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A session-isolated server that refuses requests until it has received
// notifications/initialized (as the Python SDK's servers do) still serves
// a client whose notifications/initialized went out without Mcp-Session-Id
// (claude.ai, anthropics/claude-ai-mcp#99): the front answers that POST
// 202 and cannot deliver it, so the gateway sends it to the session's
// process before the session's first request. A client that sends its own
// gets it delivered once, never twice.
func TestInitializedWithoutSessionReachesIsolatedServer(t *testing.T) {
	srv := fakeServer("strict", testkit.FakeOptions{StrictInit: true})
	srv.Isolation = config.IsolationSession
	g := startGateway(t, newConfig(srv))

	notified := func(c *mcpClient) []string {
		t.Helper()
		r := c.post(t, `{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"notified","arguments":{}}}`)
		if r.Status != http.StatusOK || len(r.Msgs) != 1 {
			t.Fatalf("notified: status %d, body %s", r.Status, r.Body)
		}
		var got []string
		if err := json.Unmarshal([]byte(toolText(t, decode(t, r.Msgs[0]))), &got); err != nil {
			t.Fatalf("notified: %v (%s)", err, r.Body)
		}
		return got
	}
	count := func(methods []string, name string) (n int) {
		for _, m := range methods {
			if m == name {
				n++
			}
		}
		return n
	}

	// claude.ai's order: initialize, then initialized without the session.
	c := g.client("strict")
	r := c.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claude-ai","version":"1"}}}`)
	if r.Status != http.StatusOK {
		t.Fatalf("initialize: %d %s", r.Status, r.Body)
	}
	session := r.Header.Get("Mcp-Session-Id")
	c.session = ""
	if r := c.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.Status != http.StatusAccepted {
		t.Fatalf("initialized without a session: %d %s", r.Status, r.Body)
	}
	c.session = session
	r = c.post(t, `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"echo","arguments":{"message":"served"}}}`)
	if r.Status != http.StatusOK || len(r.Msgs) != 1 || decode(t, r.Msgs[0]).Error != nil {
		t.Fatalf("call after initialized without a session: %d %s", r.Status, r.Body)
	}
	if got := toolText(t, decode(t, r.Msgs[0])); got != "served" {
		t.Fatalf("echo %q, want served", got)
	}
	if got := notified(c); count(got, "notifications/initialized") != 1 {
		t.Errorf("the process received %v, want notifications/initialized once", got)
	}

	// A client that sends its own: delivered once, not again before its
	// first request.
	own := g.client("strict")
	own.connect(t)
	if got := notified(own); count(got, "notifications/initialized") != 1 {
		t.Errorf("with the client's own initialized the process received %v, want it once", got)
	}
}
