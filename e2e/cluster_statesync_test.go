package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestClusterReverseBridgeStateSync holds one reverse-bridge session (a
// remote pinned to 2026-07-28, portable) on all three replicas, talking to
// each replica directly so that which one takes a request is no chance:
//   - a logging/setLevel through one replica changes what the calls
//     through each of the others log (the level goes in each request's
//     _meta: each replica's connection must have it);
//   - a resources/subscribe through one replica is honoured by the listen
//     the session's owner holds for the client's standalone stream;
//   - with Redis stopped, a logging/setLevel is answered and applies on
//     its replica at once, the others keep the old level, and they catch
//     up once Redis is back (each replica writes its held sessions' states
//     again when its subscription is back, the newest wins, and the
//     others fetch it).
func TestClusterReverseBridgeStateSync(t *testing.T) {
	requirePeers(t, everythingServer)
	redis, _, replicas, _ := startClusterWith(t, 3, nil, map[string]serverConfig{
		"modern-remote": {Type: "http", URL: startEverythingHTTP(t, true), Protocol: "2026-07-28"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url := func(i int) string { return "http://" + replicas[i].addr + "/servers/modern-remote/mcp" }
	c := &resumingClient{t: t, ctx: ctx, version: "2025-11-25"}
	resp, body := c.post(url(0), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"statesync","version":"1"}}}`)
	if c.sid = resp.Header.Get("Mcp-Session-Id"); c.sid == "" || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize on r0: %d %s", resp.StatusCode, body)
	}
	if resp, body := c.post(url(0), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", resp.StatusCode, body)
	}
	post := func(i int, msg string) string {
		t.Helper()
		resp, body := c.post(url(i), msg)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result"`) {
			t.Fatalf("r%d: %s: %d %s", i, msg, resp.StatusCode, body)
		}
		return body
	}
	for i := range replicas {
		post(i, `{"jsonrpc":"2.0","id":"ping","method":"ping"}`) // every replica holds the session
	}
	// logs is how many log messages a call through replica i gets (the
	// conformance server's tool logs three at info).
	logs := func(i int) int {
		return strings.Count(post(i, `{"jsonrpc":"2.0","id":"log","method":"tools/call","params":{"name":"test_tool_with_logging","arguments":{}}}`), `"notifications/message"`)
	}
	setLevel := func(i int, level string) {
		t.Helper()
		post(i, `{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"`+level+`"}}`)
	}
	levelOn := func(level string, want int, on ...int) {
		t.Helper()
		for _, i := range on {
			testkit.WaitFor(t, "r"+string(rune('0'+i))+" to log at "+level, func() bool { return logs(i) == want })
		}
	}

	setLevel(1, "debug")
	if n := logs(1); n != 3 {
		t.Fatalf("r1, where the level was set, logged %d messages, want 3", n)
	}
	levelOn("debug", 3, 0, 2)
	setLevel(2, "error")
	levelOn("error", 0, 0, 1, 2)

	// The client's standalone stream is served at the owner, r0; the
	// subscription goes through r2.
	events := c.open(http.MethodGet, url(0), "", "")
	updated := make(chan struct{}, 1)
	go func() {
		for {
			ev, err := events.Next()
			if err != nil {
				return
			}
			if bytes.Contains(ev.Data, []byte(`"notifications/resources/updated"`)) && bytes.Contains(ev.Data, []byte(`test://watched-resource`)) {
				select {
				case updated <- struct{}{}:
				default:
				}
			}
		}
	}()
	post(2, `{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"test://watched-resource"}}`)
	select {
	case <-updated: // the server updates it every 3 s
	case <-ctx.Done():
		t.Fatal("no resources/updated on the standalone stream at r0 for a subscription made through r2")
	}

	// Redis down: the change is answered and applies where it was made.
	redis.Stop()
	setLevel(1, "debug")
	if n := logs(1); n != 3 {
		t.Errorf("r1 logged %d messages after a setLevel there with Redis down, want 3", n)
	}
	if n := logs(0); n != 0 {
		t.Errorf("r0 logged %d messages with Redis down: it cannot have been told", n)
	}
	redis.Start()
	levelOn("debug once Redis is back", 3, 0, 2)
}
