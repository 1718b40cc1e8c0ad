package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestSessionIsolatedStateless: a server with "isolation": "session"
// answers 2026-07-28 tools/calls over HTTP, whether it speaks that
// revision (dual-era: natively) or only the session eras (translated), on
// a process apart from its sessions', which still get one each; no process
// outlives the gateway.
func TestSessionIsolatedStateless(t *testing.T) {
	marker := fmt.Sprintf("iso-stateless-gw-%d", time.Now().UnixNano())
	dual := fakeServer("dual", testkit.FakeOptions{Modern: true, Marker: marker})
	legacy := fakeServer("legacy", testkit.FakeOptions{Marker: marker})
	for _, s := range []*config.Server{dual, legacy} {
		s.Isolation = config.IsolationSession
	}
	g := startGateway(t, newConfig(dual, legacy))
	for _, tc := range []struct {
		server      string
		initialized string // what the fake's initialized tool answers a stateless request
	}{{"dual", "false"}, {"legacy", "true"}} {
		t.Run(tc.server, func(t *testing.T) {
			status, m := modernCall(t, g, tc.server, `"a"`, "echo", map[string]string{"message": "hi"}, "")
			if status != http.StatusOK || string(m["id"]) != `"a"` || !strings.Contains(string(m["result"]), `"text":"hi"`) {
				t.Fatalf("stateless echo: %d %s %s", status, m["result"], m["error"])
			}
			// A translated result gets the revision's resultType from the
			// gateway; a native one is the server's own.
			if tc.server == "legacy" && !strings.Contains(string(m["result"]), `"resultType":"complete"`) {
				t.Errorf("translated echo without resultType: %s", m["result"])
			}
			if _, m := modernCall(t, g, tc.server, "2", "initialized", nil, ""); !strings.Contains(string(m["result"]), `"text":"`+tc.initialized+`"`) {
				t.Errorf("initialized: %s %s, want %s (native: never initialized; translated: the gateway's)", m["result"], m["error"], tc.initialized)
			}
			_, m = modernCall(t, g, tc.server, "3", "pid", nil, "")
			var res struct{ Content []struct{ Text string } }
			if err := json.Unmarshal(m["result"], &res); err != nil || len(res.Content) == 0 {
				t.Fatalf("pid: %s %s", m["result"], m["error"])
			}
			stateless := res.Content[0].Text

			pids := map[string]bool{stateless: true}
			for range 2 {
				c := g.client(tc.server)
				c.connect(t)
				pid := toolText(t, c.post(t, callBody("1", "pid", map[string]string{}, "")).final(t))
				if pids[pid] {
					t.Errorf("session served by process %s, which serves another session or the stateless requests (%s)", pid, stateless)
				}
				pids[pid] = true
			}
			if n := g.pending(tc.server); n != 0 {
				t.Errorf("%d requests pending upstream", n)
			}
		})
	}
	if n := g.gw.Handler.Sessions(); n != 4 {
		t.Errorf("%d sessions recorded, want the 4 initialized ones (stateless requests leave none)", n)
	}
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	if left := testkit.WaitProcsGone(marker, 10*time.Second); len(left) != 0 {
		t.Fatalf("processes left after shutdown: %+v", left)
	}
}

// TestSessionIsolatedStatelessBadCommand: a 2026-07-28 request to a
// session-isolated server whose command does not exist gets one JSON-RPC
// error answer, with its id and naming the cause, at once; the gateway
// keeps serving its other servers.
func TestSessionIsolatedStatelessBadCommand(t *testing.T) {
	for _, protocol := range []string{config.ProtocolAuto, config.ProtocolLegacy, config.ProtocolModern} {
		t.Run(protocol, func(t *testing.T) {
			missing := missingServer("missing")
			missing.Isolation = config.IsolationSession
			missing.Protocol = protocol
			g := startGateway(t, newConfig(missing, fakeServer("fine", testkit.FakeOptions{})))
			for i := range 2 {
				start := time.Now()
				body := `{"jsonrpc":"2.0","id":"q` + fmt.Sprint(i) + `","method":"tools/call","params":{"name":"echo","arguments":{},` +
					`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
				req, _ := http.NewRequest(http.MethodPost, g.URL+"/servers/missing/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "echo")
				resp, err := g.http.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("request %d: answered after %v, want at once", i, d)
				}
				// One JSON body, one JSON-RPC error: not an SSE stream
				// that could carry more.
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
					t.Fatalf("request %d: Content-Type %q, body %q; want one JSON body", i, ct, raw)
				}
				m := decode(t, raw)
				if m.Error == nil || string(m.ID) != fmt.Sprintf(`"q%d"`, i) || !strings.Contains(m.Error.Message, "command not found: mcpgate-test-no-such-command-missing") {
					t.Errorf("request %d: status %d, body %s; want one error with the id naming the missing command", i, resp.StatusCode, raw)
				}
			}
			if status, m := modernCall(t, g, "fine", "1", "echo", map[string]string{"message": "ok"}, ""); status != http.StatusOK || !strings.Contains(string(m["result"]), `"text":"ok"`) {
				t.Errorf("another server: %d %s %s", status, m["result"], m["error"])
			}
		})
	}
}
