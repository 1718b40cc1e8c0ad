package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClaudeQuirksEverythingServer replays what Claude's clients send that
// the spec's letter refuses (see docs/eras.md, "What real clients send") against
// the gateway binary with the Go SDK's conformance server behind it, in
// each isolation mode: every call succeeds and carries its id byte for
// byte. The server speaks 2026-07-28 itself, so the stateless requests
// reach it as they came, and sessions go to the process the gateway (or,
// in session mode, the client) initialized.
func TestClaudeQuirksEverythingServer(t *testing.T) {
	requirePeers(t, everythingServer)
	base := startGateway(t, gatewayConfig{MCPServers: map[string]serverConfig{
		"shared":  {Command: everythingServer},
		"session": {Command: everythingServer, Isolation: "session"},
	}})
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(t *testing.T, url, body string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Type") == "text/event-stream" {
			var last []byte
			for _, l := range bytes.Split(raw, []byte("\n")) {
				if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok && len(d) > 0 {
					last = d
				}
			}
			raw = last
		}
		return resp, raw
	}
	succeeded := func(t *testing.T, what string, resp *http.Response, reply []byte, id string) {
		t.Helper()
		if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(reply, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":`)) ||
			!bytes.Contains(reply, []byte("This is a simple text response for testing.")) {
			t.Errorf("%s: %d %s, want the tool's result for id %s", what, resp.StatusCode, reply, id)
		}
	}
	const modernCall = `,"method":"tools/call","params":{"name":"test_simple_text","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	const sessionCall = `,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`

	for _, server := range []string{"shared", "session"} {
		t.Run(server, func(t *testing.T) {
			url := base + "/servers/" + server + "/mcp"
			ua := []string{"User-Agent", "Claude-User"}

			// claude.ai's connectors: a 2026-07-28 body, a 2025-11-25 header.
			resp, reply := post(t, url, `{"jsonrpc":"2.0","id":12345678901234567890123`+modernCall, append(ua, "MCP-Protocol-Version", "2025-11-25")...)
			succeeded(t, "2026-07-28 body under 2025-11-25", resp, reply, "12345678901234567890123")
			resp, reply = post(t, url, `{"jsonrpc":"2.0","id":"conn-\u00e9"`+modernCall, append(ua, "MCP-Protocol-Version", "2025-11-25, 2025-11-25")...)
			succeeded(t, "2026-07-28 body under 2025-11-25 twice", resp, reply, `"conn-\u00e9"`)

			// A session: initialize, then claude.ai's initialized without
			// the session id (never with it), then the calls with the other
			// quirks. In session mode the server's process never gets an
			// initialized: the Go SDK's server serves it all the same.
			resp, reply = post(t, url, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claude-ai","version":"1"}}}`, ua...)
			sid := resp.Header.Get("Mcp-Session-Id")
			var init struct {
				Result struct{ ProtocolVersion string } `json:"result"`
			}
			if resp.StatusCode != http.StatusOK || sid == "" || json.Unmarshal(reply, &init) != nil || init.Result.ProtocolVersion != "2025-11-25" {
				t.Fatalf("initialize: %d %s", resp.StatusCode, reply)
			}
			if resp, reply := post(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, append(ua, "MCP-Protocol-Version", "2025-11-25")...); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("initialized without the session id: %d %s", resp.StatusCode, reply)
			}
			for _, tc := range []struct {
				what, id string
				versions []string
			}{
				{"the newest version in the header of a 2025-11-25 session", `"s1"`, []string{"2026-07-28"}},
				{"the session's version twice in one line", "2", []string{"2025-11-25, 2025-11-25"}},
				{"the session's version on two lines", "3e0", []string{"2025-11-25", "2025-11-25"}},
			} {
				hdr := append(append([]string{}, ua...), "Mcp-Session-Id", sid)
				for _, v := range tc.versions {
					hdr = append(hdr, "MCP-Protocol-Version", v)
				}
				resp, reply := post(t, url, `{"jsonrpc":"2.0","id":`+tc.id+sessionCall, hdr...)
				succeeded(t, tc.what, resp, reply, tc.id)
			}
			// Still refused: two different values, and an unknown version
			// in a 2026-07-28 body.
			if resp, reply := post(t, url, `{"jsonrpc":"2.0","id":9`+sessionCall, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25, 2025-06-18"); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("two different versions: %d %s", resp.StatusCode, reply)
			}
			if resp, reply := post(t, url, `{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`,
				"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "server/discover"); resp.StatusCode != http.StatusBadRequest || !bytes.Contains(reply, []byte("-32020")) {
				t.Errorf("an unknown body version under 2026-07-28: %d %s", resp.StatusCode, reply)
			}
		})
	}
}
