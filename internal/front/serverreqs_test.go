package front

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/seal"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// askBackend's sessions are portable, and its tools/call asks the client
// (a server request of id 41) and replies with the client's answer as it
// arrived.
type askBackend struct {
	mu      sync.Mutex
	answers []string // the answers its connections got, as they arrived
}

func (b *askBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	conn.Handoff(ctx)([]byte("ask"))
	return &askConn{b: b, asked: map[string]held{}}, nil
}

func (b *askBackend) Resume(context.Context, conn.Stream, []byte) (conn.Conn, error) {
	return &askConn{b: b, asked: map[string]held{}, version: v0618}, nil
}

func (b *askBackend) ServesStateless() bool { return false }

func (b *askBackend) OpenStateless(context.Context, conn.Stream, string, []byte) (conn.StatelessConn, error) {
	return conn.StatelessConn{}, conn.ErrSessionsOnly
}

type askConn struct {
	b       *askBackend
	mu      sync.Mutex
	version string
	asked   map[string]held // the server request's id -> the call it is for
}

func (c *askConn) Handle(_ context.Context, msg *jsonrpc.Message, out conn.Stream) {
	id := bytes.Clone(msg.Bytes(msg.ID))
	switch {
	case msg.Kind == jsonrpc.KindResponse:
		c.b.mu.Lock()
		c.b.answers = append(c.b.answers, string(msg.Raw))
		c.b.mu.Unlock()
		c.mu.Lock()
		call, ok := c.asked[string(id)]
		delete(c.asked, string(id))
		c.mu.Unlock()
		if ok {
			call.out.Reply(jsonrpc.Response(call.id, []byte(`{"got":`+string(msg.Raw)+`}`)))
		}
	case msg.Kind != jsonrpc.KindRequest:
	case msg.MethodIs("initialize"):
		c.mu.Lock()
		c.version = v0618
		c.mu.Unlock()
		out.Reply(jsonrpc.Response(id, []byte(`{"protocolVersion":"`+v0618+`","capabilities":{}}`)))
	case msg.MethodIs("tools/call"):
		c.mu.Lock()
		c.asked["41"] = held{id, out}
		c.mu.Unlock()
		out.Send(jsonrpc.Request([]byte("41"), "sampling/createMessage", []byte(`{"messages":[],"maxTokens":1}`)))
	default:
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

// sseData POSTs body in session sid on srv and delivers each SSE data line
// of the answer.
func sseData(t *testing.T, ctx context.Context, url, sid, body string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+mcpPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", v0618)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("answer: %d %s, want an SSE stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan string, 16)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- d
			}
		}
	}()
	return out
}

// A server request sent on a portable session's request stream by one
// replica has a sealed id; the client's answer landing on another replica
// is forwarded to the one that asked, which gives its server the answer
// under the server's own id, byte for byte.
func TestServerRequestAnswerForwardedToAsker(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	ba, bb := &askBackend{}, &askBackend{}
	a := startReplica(t, cl, "a", ring, ba)
	b := startReplica(t, cl, "b", ring, bb)
	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", func() bool { rec, _, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// The call lands on b, which resumes the session and asks.
	events := sseData(t, ctx, b.srv.URL, sid, `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"ask"}}`)
	var ask struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal([]byte(<-events), &ask); err != nil || ask.Method != "sampling/createMessage" {
		t.Fatalf("first event: %v %+v, want the server request", err, ask)
	}
	if string(ask.ID) == "41" || ask.ID[0] != '"' {
		t.Fatalf("the server request's id reached the client as %s, want a sealed string", ask.ID)
	}

	// A client id of its own (not sealed) stays where it lands.
	resp, _ := do(t, a.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"mine","result":{}}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusAccepted || a.h.Forwards().Forwarded != 0 {
		t.Fatalf("an unsealed answer on a: %d, forwards %+v; want 202 and none forwarded", resp.StatusCode, a.h.Forwards())
	}
	// The answer lands on a: forwarded to b.
	resp, body := do(t, a.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{"answer":"from the client"}}`,
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the answer on a: %d %s, want 202", resp.StatusCode, body)
	}
	// (Counted once b's answer was copied: maybe after the client read it.)
	testkit.WaitFor(t, "a counting the answer forwarded", func() bool { return a.h.Forwards().Forwarded == 1 })
	final := <-events
	if !strings.Contains(final, `"id":"c-1"`) || !strings.Contains(final, `{"got":{"jsonrpc":"2.0","id":41,"result":{"answer":"from the client"}}}`) {
		t.Errorf("the call's reply: %s, want the answer as b's server got it, under its own id 41", final)
	}
	bb.mu.Lock()
	got := strings.Join(bb.answers, "\n")
	bb.mu.Unlock()
	if got != `{"jsonrpc":"2.0","id":41,"result":{"answer":"from the client"}}` {
		t.Errorf("b's server got %q", got)
	}
	ba.mu.Lock()
	if len(ba.answers) != 1 || !strings.Contains(ba.answers[0], `"mine"`) {
		t.Errorf("a's server got %q, want only the unsealed answer", ba.answers)
	}
	ba.mu.Unlock()

	// The asker gone: the answer is not forwarded (its request went with
	// it), and the POST is still answered. (Gone: no heartbeat, and its
	// dial refused; heartbeats alone do not stop a forward, forward.go.)
	b.srv.Close()
	cl.mu.Lock()
	cl.dead["b"] = true
	cl.mu.Unlock()
	resp, _ = do(t, a.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":`+string(ask.ID)+`,"result":{}}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v0618)
	if resp.StatusCode != http.StatusAccepted || a.h.Forwards().Forwarded != 1 || a.h.Forwards().Gone != 1 {
		t.Errorf("an answer for a replica gone: %d, forwards %+v; want 202, none more forwarded, one gone", resp.StatusCode, a.h.Forwards())
	}
}

func FuzzOpenServerRequestID(f *testing.F) {
	h := &Handler{cfg: Config{Seal: seal.NewRandom()}}
	h.parking.Place = placeOf(newMemCluster().replica("a", "127.0.0.1:1"))
	sealed := h.sealServerRequest("s", []byte(`{"jsonrpc":"2.0","id":41,"method":"m"}`))
	m, _ := jsonrpc.Parse(sealed)
	f.Add(m.Bytes(m.ID))
	f.Add([]byte(`"x"`))
	f.Add([]byte(`41`))
	f.Fuzz(func(t *testing.T, id []byte) {
		place, orig, ok := h.openServerRequestID("s", id)
		if ok && (string(place) != string(h.parking.Place) || len(orig) == 0) {
			t.Fatalf("opened %q: place %q, id %q", id, place, orig)
		}
	})
}
