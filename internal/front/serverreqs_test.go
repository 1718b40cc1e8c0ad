package front

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// askBackend's sessions are portable; its connections ask the client
// (a server request, id 99) when called "ask", and answer the call with
// the client's answer: only the connection that asked knows the request.
type askBackend struct {
	conn.SessionsOnly
	mu    sync.Mutex
	asked int // server requests its connections sent
}

func (b *askBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	if sink := conn.Handoff(ctx); sink != nil {
		sink([]byte("ask-state"))
	}
	return &askConn{b: b}, nil
}

func (b *askBackend) Resume(_ context.Context, general conn.Stream, state []byte) (conn.Conn, error) {
	return &askConn{b: b, version: v0618}, nil
}

type askConn struct {
	b       *askBackend
	mu      sync.Mutex
	version string
	pending []byte      // the id of the "ask" call waiting for the client's answer
	out     conn.Stream // its stream
}

func (c *askConn) Handle(_ context.Context, msg *jsonrpc.Message, out conn.Stream) {
	id := bytes.Clone(msg.Bytes(msg.ID))
	switch {
	case msg.Kind == jsonrpc.KindRequest && msg.MethodName() == "initialize":
		c.mu.Lock()
		c.version = v0618
		c.mu.Unlock()
		out.Reply(jsonrpc.Response(id, []byte(`{"protocolVersion":"`+v0618+`","capabilities":{}}`)))
	case msg.Kind == jsonrpc.KindRequest && msg.MethodName() == "ask":
		c.mu.Lock()
		c.pending, c.out = id, out
		c.mu.Unlock()
		c.b.mu.Lock()
		c.b.asked++
		c.b.mu.Unlock()
		out.Send([]byte(`{"jsonrpc":"2.0","id":99,"method":"sampling/createMessage","params":{}}`))
	case msg.Kind == jsonrpc.KindResponse && string(id) == "99":
		c.mu.Lock()
		pending, out := c.pending, c.out
		c.pending = nil
		c.mu.Unlock()
		if pending != nil {
			_, result, _ := bytes.Cut(msg.Raw, []byte(`"result":`))
			out.Reply(jsonrpc.Response(pending, bytes.TrimSuffix(result, []byte("}"))))
		}
	case msg.Kind == jsonrpc.KindRequest:
		out.Reply(jsonrpc.Response(id, []byte(`{}`)))
	}
}

func (c *askConn) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}
func (c *askConn) Abandon(conn.Stream) {}
func (c *askConn) CloseWith(string)    {}
func (c *askConn) Close()              {}

// A server request relayed by one replica is answered by a client whose
// answer lands on another: the answer reaches the connection that asked,
// under the id it gave, and the call it belongs to gets its one reply.
func TestServerRequestAnswerReachesRelayingReplica(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, &askBackend{})
	b := startReplica(t, cl, "b", ring, &askBackend{})
	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", func() bool { rec, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil })

	// The call lands on b (which resumes the session); its stream brings
	// the server's request.
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+mcpPath, strings.NewReader(`{"jsonrpc":"2.0","id":"call-1","method":"ask"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", v0618)
	resp, err := b.srv.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("ask on b: %v %v", resp, err)
	}
	defer resp.Body.Close()
	rd := sse.NewReader(resp.Body, 0)
	ev, err := rd.Next()
	if err != nil {
		t.Fatalf("the server request: %v", err)
	}
	m, err := jsonrpc.Parse(ev.Data)
	if err != nil || m.Kind != jsonrpc.KindRequest || !bytes.HasPrefix(m.Bytes(m.ID), []byte(`"`+serverReqPrefix)) {
		t.Fatalf("the server request as the client sees it: %s (%v); want its id sealed", ev.Data, err)
	}
	// The client's answer lands on a: forwarded to b, which asked.
	answer := `{"jsonrpc":"2.0","id":` + string(m.Bytes(m.ID)) + `,"result":{"answer":42}}`
	ans, body := do(t, a.srv, http.MethodPost, mcpPath, answer, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if ans.StatusCode != http.StatusAccepted {
		t.Fatalf("the answer on a: %d %s", ans.StatusCode, body)
	}
	if f := a.h.Forwards(); f.Forwarded != 1 {
		t.Errorf("a did not forward the answer to b: %+v", f)
	}
	final, err := rd.Next()
	if err != nil || !strings.Contains(string(final.Data), `"id":"call-1"`) || !strings.Contains(string(final.Data), `"answer":42`) {
		t.Fatalf("the call's reply: %s (%v)", final.Data, err)
	}
	// An answer with a forged or foreign id reaches nobody, and is no error.
	for _, id := range []string{`"` + serverReqPrefix + `AAAA"`, `"` + serverReqPrefix + ring.Seal(serverReqPurpose("another-session"), []byte("x"), 0) + `"`} {
		resp, body := do(t, a.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":`+id+`,"result":{}}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("a forged answer: %d %s", resp.StatusCode, body)
		}
	}
}

func FuzzOpenServerReqID(f *testing.F) {
	h := New(Config{Backends: map[string]conn.Backend{}, Cluster: newMemCluster().replica("a", "127.0.0.1:1")})
	defer h.Close()
	sealed := h.sealServerRequest("s", []byte(`{"jsonrpc":"2.0","id":7,"method":"m"}`))
	m, _ := jsonrpc.Parse(sealed)
	f.Add(m.Bytes(m.ID))
	f.Add([]byte(`"` + serverReqPrefix + `"`))
	f.Fuzz(func(t *testing.T, id []byte) {
		c, orig, ok := h.openServerReqID("s", id)
		if ok && (c.instance != "a" || len(orig) == 0) {
			t.Fatalf("%q opened to %+v %q", id, c, orig)
		}
	})
}
