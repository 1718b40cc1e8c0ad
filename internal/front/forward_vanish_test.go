package front

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A client that vanishes mid-forward cancels the forward: the owner sees
// its request end as it would a direct client's, so its backend is told
// to abandon the call (the mux sends notifications/cancelled upstream);
// a forwarded stream's owner lets the stream go, so that it opens again.
// Neither replica keeps a handler, a goroutine or a connection of it.
func TestClientVanishesMidForward(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	ba := newFakeBackend()
	a := startReplica(t, cl, "a", ring, ba)
	b := startReplica(t, cl, "b", ring, newFakeBackend())
	sid := initSession(t, a.srv)
	conn := <-ba.conns
	tidy := func() {
		b.h.forwardTransport.CloseIdleConnections()
		a.srv.Client().CloseIdleConnections()
		b.srv.Client().CloseIdleConnections()
	}
	baseline := testkit.SettleGoroutines(t, "before the forwards", runtime.NumGoroutine(), tidy)

	// A direct client leaving its call, for comparison: one abandon.
	for _, via := range []*replica{a, b} {
		before := ba.abandons.Load()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, via.srv.URL+mcpPath, strings.NewReader(`{"jsonrpc":"2.0","id":"x\u00e9","method":"hold"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", v0618)
			resp, err := via.srv.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		testkit.Receive(t, conn.held, "the call held at the owner")
		cancel()
		if err := testkit.Receive(t, done, "the client's call to end"); err == nil {
			t.Errorf("the call answered after its client left")
		}
		testkit.WaitFor(t, "the owner to abandon the call its client left", func() bool { return ba.abandons.Load() == before+1 })
		for _, r := range []*replica{a, b} {
			if !r.h.handlers.wait(testkit.WaitTimeout) {
				t.Fatalf("a handler still runs after its client left")
			}
		}
	}

	// A forwarded stream whose client leaves: the owner lets it go, so
	// the next GET through b opens it again rather than finding it taken.
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+mcpPath, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", v0618)
		resp, err := b.srv.Client().Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the stream through b: %v %v, want 200 (open again after its client left)", resp, err)
		}
		cancel()
		resp.Body.Close()
		for _, r := range []*replica{a, b} {
			if !r.h.handlers.wait(testkit.WaitTimeout) {
				t.Fatalf("a stream's handler still runs after its client left")
			}
		}
	}
	if f := b.h.Forwards(); f.Forwarded != 2 || f.Failed != 0 || f.Silent != 0 {
		t.Errorf("forwards: %+v, want the two streams forwarded (the call left before its answer began)", f)
	}
	testkit.SettleGoroutines(t, "after the clients left", baseline, tidy)
}
