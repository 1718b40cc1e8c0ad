package front

import (
	"context"
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// heldBackend is a portableBackend whose resumed connections record what
// the front tells them of the client's standalone stream
// (conn.WithGeneralHeld); an opened one must be told nothing.
type heldBackend struct {
	*portableBackend
	held      chan bool
	openGiven chan bool // whether Open's context carried a registration
}

func (b *heldBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	b.openGiven <- conn.OnGeneralHeld(ctx) != nil
	return b.portableBackend.Open(ctx, general)
}

func (b *heldBackend) Resume(ctx context.Context, general conn.Stream, state []byte) (conn.Conn, error) {
	if register := conn.OnGeneralHeld(ctx); register != nil {
		register(func(held bool) { b.held <- held })
	}
	return b.portableBackend.Resume(ctx, general, state)
}

// TestResumedSessionToldOfStandaloneStream: a session opened on replica a
// and resumed on b (a request); a gone, the client's standalone GET is
// served at b, whose connection is told the stream is held there as it
// attaches, and let go as it ends; the connection a opened is given no
// registration (it holds the server's stream as a lone gateway does).
func TestResumedSessionToldOfStandaloneStream(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	ba := &heldBackend{portableBackend: &portableBackend{fakeBackend: newFakeBackend()}, held: make(chan bool, 8), openGiven: make(chan bool, 8)}
	bb := &heldBackend{portableBackend: &portableBackend{fakeBackend: newFakeBackend()}, held: make(chan bool, 8), openGiven: make(chan bool, 8)}
	a := startReplica(t, cl, "a", ring, ba)
	b := startReplica(t, cl, "b", ring, bb)
	sid := initSession(t, a.srv)
	if testkit.Receive(t, ba.openGiven, "the session opened on a") {
		t.Error("Open's context carried a registration for the client's stream")
	}
	store := cl.replica("", "")
	testkit.WaitFor(t, "the handoff record stored", func() bool {
		rec, _, _ := store.State(context.Background(), sid)
		return rec != nil
	})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if resp, body := do(t, b.srv, http.MethodPost, mcpPath, ping, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618); resp.StatusCode != http.StatusOK {
		t.Fatalf("ping on b: %d %s", resp.StatusCode, body)
	}
	select {
	case h := <-bb.held:
		t.Fatalf("b's connection was told %v before any standalone stream", h)
	default:
	}
	a.srv.Close() // the owner gone: the standalone stream is served at b

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+mcpPath, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", v0618)
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the standalone GET at b: %d", resp.StatusCode)
	}
	if !testkit.Receive(t, bb.held, "b's connection told the stream is held") {
		t.Fatal("b's connection was told false first")
	}
	cancel()
	if testkit.Receive(t, bb.held, "b's connection told the stream went") {
		t.Fatal("b's connection was told true again")
	}
}
