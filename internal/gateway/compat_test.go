package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// This file replays what real clients send that the spec's letter refuses
// (Claude's connectors and Claude Code; anthropics/claude-code#93290,
// anthropics/claude-ai-mcp#99) against the gateway with a real child, and
// what no client may send: a request without an id.

// modernMeta is the _meta of a 2026-07-28 request.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// rawPost POSTs body to path with the headers in hdr (name, value pairs;
// a name may repeat) and returns the status and the reply: the body, or
// an SSE stream's last data line.
func rawPost(t *testing.T, g *testGateway, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
		raw = bytes.TrimPrefix(lines[len(lines)-1], []byte("data: "))
	}
	return resp.StatusCode, raw
}

// echoed checks that reply is the echo tool's result for message, with
// id exactly as sent.
func echoed(t *testing.T, what string, status int, reply []byte, id, message string) {
	t.Helper()
	if status != http.StatusOK {
		t.Errorf("%s: status %d: %s", what, status, reply)
		return
	}
	if !bytes.HasPrefix(reply, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":`)) {
		t.Errorf("%s: reply %s, want id %s byte for byte", what, reply, id)
		return
	}
	if got := toolText(t, decode(t, reply)); got != message {
		t.Errorf("%s: echo %q, want %q", what, got, message)
	}
}

// Every behaviour of Claude's clients that has one reading is served: a
// call actually succeeds and returns its id byte for byte. What stays
// ambiguous stays refused, as the conformance suite expects.
func TestClaudeClientQuirksServed(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}))
	cfg.Gateway.Metrics = true
	g := startGateway(t, cfg)
	const path = "/servers/a/mcp"
	echo := func(id, message string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + message + `"},` + modernMeta + `}}`
	}
	claude := []string{"User-Agent", "Claude-User (claude.ai connector)"}

	// claude.ai's connectors: a 2026-07-28 body under a 2025-11-25 header,
	// without the revision's Mcp-Method and Mcp-Name (and with them).
	st, reply := rawPost(t, g, path, echo("12345678901234567890123", "connector"), append(claude, "MCP-Protocol-Version", "2025-11-25")...)
	echoed(t, "2026-07-28 body under a 2025-11-25 header", st, reply, "12345678901234567890123", "connector")
	st, reply = rawPost(t, g, path, echo(`"claude-\u00e9-1"`, "with headers"), append(claude, "MCP-Protocol-Version", "2025-06-18", "Mcp-Method", "tools/call", "Mcp-Name", "echo")...)
	echoed(t, "2026-07-28 body under a 2025-06-18 header with Mcp-Method", st, reply, `"claude-\u00e9-1"`, "with headers")
	// The same value twice, in one line and in two.
	st, reply = rawPost(t, g, path, echo("-7.50e3", "twice"), "MCP-Protocol-Version", "2026-07-28, 2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo")
	echoed(t, "2026-07-28 twice in one line", st, reply, "-7.50e3", "twice")
	st, reply = rawPost(t, g, path, echo("8", "older twice"), append(claude, "MCP-Protocol-Version", "2025-11-25", "Mcp-Protocol-Version", "2025-11-25")...)
	echoed(t, "2026-07-28 body under 2025-11-25 on two lines", st, reply, "8", "older twice")

	// claude.ai's notifications/initialized without the session id.
	if st, reply := rawPost(t, g, path, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "MCP-Protocol-Version", "2025-11-25"); st != http.StatusAccepted {
		t.Errorf("notifications/initialized without a session: %d %s", st, reply)
	}

	// Sessions: a header naming the newest version on a 2025-11-25
	// session, and the session's version repeated (Claude Code 2.1).
	c := g.client("a")
	c.connect(t)
	session := func(id, message string, versions ...string) (int, []byte) {
		hdr := []string{"Mcp-Session-Id", c.session}
		for _, v := range versions {
			hdr = append(hdr, "MCP-Protocol-Version", v)
		}
		return rawPost(t, g, path, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"message":"`+message+`"}}}`, hdr...)
	}
	st, reply = session(`"s-1"`, "newest header", "2026-07-28")
	echoed(t, "a 2026-07-28 header on a 2025-11-25 session", st, reply, `"s-1"`, "newest header")
	st, reply = session("2", "same twice", "2025-11-25, 2025-11-25")
	echoed(t, "the session's version twice in one line", st, reply, "2", "same twice")
	st, reply = session("3", "two lines", "2025-11-25", "2025-11-25")
	echoed(t, "the session's version on two lines", st, reply, "3", "two lines")
	st, reply = session("4", "older", "2025-06-18")
	echoed(t, "an older supported version on a 2025-11-25 session", st, reply, "4", "older")

	// Still refused.
	for _, tc := range []struct {
		what   string
		status int
		code   int
		post   func() (int, []byte)
	}{
		{"an unknown body version under a 2026-07-28 header", 400, -32020, func() (int, []byte) {
			return rawPost(t, g, path, `{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`,
				"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "server/discover")
		}},
		{"an unknown body version under an older header", 400, -32020, func() (int, []byte) {
			return rawPost(t, g, path, `{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`,
				"MCP-Protocol-Version", "2025-11-25")
		}},
		{"a 2026-07-28 body under two different values", 400, -32020, func() (int, []byte) {
			return rawPost(t, g, path, echo("9", "x"), "MCP-Protocol-Version", "2025-11-25, 2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo")
		}},
		{"two different values on a session", 400, -32600, func() (int, []byte) { return session("9", "x", "2025-11-25", "2025-06-18") }},
		{"an unknown version on a session", 400, -32600, func() (int, []byte) { return session("9", "x", "2099-01-01") }},
	} {
		st, reply := tc.post()
		if m := decode(t, reply); st != tc.status || m.Error == nil || m.Error.Code != tc.code {
			t.Errorf("%s: %d %s, want %d / %d", tc.what, st, reply, tc.status, tc.code)
		}
	}

	// Counted, for the metrics.
	n := g.gw.Handler.CompatCounts()
	if got := n.VersionHeaderMismatch; got["body_newer"] != 3 || got["repeated"] != 4 || got["session_other"] != 2 {
		t.Errorf("version header mismatches counted %v, want body_newer 3, repeated 4, session_other 2", got)
	}
	if n.InitializedWithoutSession != 1 {
		t.Errorf("initialized without session counted %d, want 1", n.InitializedWithoutSession)
	}
	resp, err := g.http.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	scrape, _ := io.ReadAll(resp.Body)
	for _, line := range []string{`mcpgate_version_header_mismatch_total{kind="body_newer"} 3`, `mcpgate_initialized_without_session_total 1`} {
		if !bytes.Contains(scrape, []byte(line)) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// A request method without an id is no request (it cannot be answered):
// on every transport, at a server's URL or an endpoint's, it is dropped and
// counted, and the server never gets it, whether the policy denies its
// tool or not. A notification still goes
// through (the control that the server records what it gets).
func TestRequestsWithoutIDNeverReachTheServer(t *testing.T) {
	opts := testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"read_a", "read_secret"}}}
	cfg := newConfig(fakeServer("a", opts))
	cfg.Servers["a"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Tools: []string{"read_secret"}},
	}}
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a"})
	g := startGateway(t, cfg)
	const denied = `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"read_secret","arguments":{"message":"x"}}}`
	const allowed = `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"read_a","arguments":{"message":"x"}}}`

	// Streamable HTTP, one message per POST (2025-11-25).
	c := g.client("a")
	c.connect(t)
	for _, body := range []string{denied, allowed, `{"jsonrpc":"2.0","method":"ping"}`, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`} {
		if r := c.post(t, body); r.Status != http.StatusAccepted {
			t.Errorf("POST %s: %d %s", body, r.Status, r.Body)
		}
	}

	// Through an endpoint merging the server (by its exposed name).
	e := g.client("a")
	e.url = g.URL + "/endpoints/all/mcp"
	e.connect(t)
	if r := e.post(t, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a__read_secret","arguments":{}}}`); r.Status != http.StatusAccepted {
		t.Errorf("endpoint POST: %d %s", r.Status, r.Body)
	}

	// Inside a 2025-03-26 batch, beside a request that is answered.
	old := g.client("a")
	old.version = "2025-03-26"
	old.connect(t)
	r := old.post(t, `[`+denied+`,{"jsonrpc":"2.0","id":12345678901234567890123,"method":"ping"},`+allowed+`]`)
	if r.Status != http.StatusOK || len(r.Msgs) != 1 || !bytes.HasPrefix(r.Msgs[0], []byte(`{"jsonrpc":"2.0","id":12345678901234567890123,"result"`)) {
		t.Errorf("batch: %d %q %s", r.Status, r.Msgs, r.Body)
	}

	// A legacy session's /messages.
	l := openLegacy(t, g, "/servers/a/sse", nil)
	l.initialize()
	for _, body := range []string{denied, allowed} {
		if st := l.post(body); st != http.StatusAccepted {
			t.Errorf("legacy POST: %d", st)
		}
	}
	if m := l.call(`{"jsonrpc":"2.0","id":"after","method":"ping"}`); string(m.ID) != `"after"` || m.Error != nil {
		t.Errorf("legacy ping after: %+v", m)
	}

	// A 2026-07-28 request without an id.
	if st, reply := rawPost(t, g, "/servers/a/mcp", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"read_secret","arguments":{},`+modernMeta+`}}`,
		"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "read_secret"); st != http.StatusAccepted {
		t.Errorf("stateless: %d %s", st, reply)
	}

	// What the (one, shared) process got without an id.
	var got []string
	if err := json.Unmarshal([]byte(toolText(t, c.post(t, callBody("99", "notified", nil, "")).final(t))), &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "notifications/roots/list_changed") {
		t.Fatalf("the server recorded %q: not even the notification", got)
	}
	for _, m := range got {
		if !strings.HasPrefix(m, "notifications/") {
			t.Errorf("the server got %q without an id (all: %q)", m, got)
		}
	}
	want := map[string]uint64{"streamable": 4, "batch": 2, "legacy_sse": 2, "stateless": 1}
	if n := g.gw.Handler.CompatCounts().RequestsWithoutID; !maps.Equal(n, want) {
		t.Errorf("dropped counted %v, want %v", n, want)
	}
}
