package faults

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// statelessRequest is a tools/call of the stateless revision (2026-07-28)
// to server: no session, the revision's _meta and headers.
func statelessRequest(ctx context.Context, g *testGateway, server, id, tool string, args any) *http.Request {
	body := strings.Replace(callBody(id, tool, args, ""), `"arguments":`,
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"arguments":`, 1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/servers/"+server+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	return req
}

// statelessChaos is a chaos server serving stateless requests by
// translation (pinned to the session eras: no probe to wait for).
func statelessChaos(name string, o testkit.ChaosOptions) *config.Server {
	s := chaosServer(name, o)
	s.Protocol = config.ProtocolLegacy
	return s
}

// TestFault4_StatelessInFlightAtShutdown: a 2026-07-28 request in flight
// when the gateway stops gets a JSON-RPC error with its own id, never
// silence or an empty body; nothing outlives the gateway.
func TestFault4_StatelessInFlightAtShutdown(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	m := marker(t, "shut")
	g := startGateway(t, newConfig(statelessChaos("shut", testkit.ChaosOptions{Marker: m, Journal: journal})))
	res := make(chan string, 1)
	go func() {
		resp, err := g.hc.Do(statelessRequest(context.Background(), g, "shut", `"s1"`, "slow", map[string]int{"ms": 600000}))
		if err != nil {
			res <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		res <- string(b)
	}()
	testkit.WaitFor(t, "the slow call to reach the server", func() bool { return len(testkit.JournalLines(journal, "called slow")) > 0 })
	g.stop()
	select {
	case body := <-res:
		if !strings.Contains(body, `"id":"s1"`) || !strings.Contains(body, `"error"`) || strings.Count(body, `"id":"s1"`) != 1 {
			t.Errorf("stateless request in flight at shutdown: %q, want one JSON-RPC error with its id", body)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("stateless request in flight at shutdown not answered 5s after shutdown")
	}
	base.check(t, m)
}

// TestFault5_VanishedStatelessClient: a 2026-07-28 client that vanishes
// mid-call (its connection closes) has its request cancelled upstream at
// once, while another stateless client of the same process is served.
func TestFault5_VanishedStatelessClient(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	m := marker(t, "gone")
	g := startGateway(t, newConfig(statelessChaos("gone", testkit.ChaosOptions{Marker: m, Journal: journal})))
	ctx, vanish := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := g.hc.Do(statelessRequest(ctx, g, "gone", "1", "slow", map[string]int{"ms": 600000})); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	testkit.WaitFor(t, "the slow call to reach the server", func() bool { return len(testkit.JournalLines(journal, "called slow")) > 0 })
	vanish()
	<-done
	// The slow tool ends only when cancelled (600 s otherwise).
	testkit.WaitFor(t, "the vanished client's call to end upstream", func() bool { return len(testkit.JournalLines(journal, "replied slow")) > 0 })

	ctx2, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := g.hc.Do(statelessRequest(ctx2, g, "gone", "1", "echo", map[string]string{"message": "still here"}))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "still here") {
		t.Errorf("another stateless client after one vanished: %d %s", resp.StatusCode, b)
	}
	g.stop()
	base.check(t, m)
}

// TestFault4_ParkedRequestAtShutdown: a 2026-07-28 request parked for
// input (its server asked the client for sampling; the client got
// input_required with a requestState sealed by the key ring) when the
// gateway stops: shutdown does not wait for the retry that never comes
// (InputWait is minutes), the parked request's timer and connection end,
// and nothing outlives the gateway.
func TestFault4_ParkedRequestAtShutdown(t *testing.T) {
	base := takeBaseline()
	m := marker(t, "parked")
	s := fakeServer("parked", testkit.FakeOptions{Marker: m})
	s.Protocol = config.ProtocolSessions // translated: the gateway parks the request
	g := startGateway(t, newConfig(s))
	req := statelessRequest(context.Background(), g, "parked", `"p1"`, "sample", map[string]string{"prompt": "hi"})
	body, _ := io.ReadAll(req.Body)
	body = []byte(strings.Replace(string(body), `clientCapabilities":{}`, `clientCapabilities":{"sampling":{}}`, 1))
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader(string(body))), int64(len(body))
	resp, err := g.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(got), `"input_required"`) || !strings.Contains(string(got), `"requestState"`) || !strings.Contains(string(got), `"id":"p1"`) {
		t.Fatalf("a call whose server asks for sampling: %s, want input_required with a requestState", got)
	}
	if d, bound := g.stop(), g.cfg.Gateway.DrainTimeout+stopBound; d >= bound {
		t.Errorf("shutdown with a request parked for input took %v, past its bound %v (it must not wait for the retry)", d, bound)
	}
	base.check(t, m)
}
