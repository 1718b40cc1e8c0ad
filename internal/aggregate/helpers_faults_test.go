package aggregate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/servers"
)

// Helpers of the fault tests (*_faults_test.go): hostile clients and
// members on real member backends (the testkit fake behind a
// servers.Server), and the accounting that tells what went wrong.

// hookStream is a client stream that runs onReply (if set) synchronously
// inside Reply, as a client reacting at once to an answer would: the
// worst case for whatever the endpoint does right after answering.
type hookStream struct {
	*stream
	onReply func(msg []byte)
}

func (h *hookStream) Reply(msg []byte) {
	h.stream.Reply(msg)
	if h.onReply != nil {
		h.onReply(msg)
	}
}

// sendTo hands a request to the session, answered on out.
func (cl *client) sendTo(raw string, out conn.Stream) {
	cl.t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		cl.t.Fatalf("%s: %v", raw, err)
	}
	cl.conn.Handle(context.Background(), &m, out)
}

// replyWithin waits for the stream's reply for at most d.
func (s *stream) replyWithin(t *testing.T, d time.Duration, what string) []byte {
	t.Helper()
	select {
	case r := <-s.replied:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no reply within %v", what, d)
		return nil
	}
}

// parseMsg parses a client's message.
func parseMsg(raw string) (jsonrpc.Message, error) { return jsonrpc.Parse([]byte(raw)) }

// idOf returns the raw id of a JSON-RPC message.
func idOf(t *testing.T, msg []byte) string {
	t.Helper()
	m, err := jsonrpc.Parse(msg)
	if err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	return string(m.Bytes(m.ID))
}

// toolCall returns a tools/call request.
func toolCall(id, name, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
}

// inflightAt returns the tools/call names in flight at member's fake (as
// its "calls" tool reports them), called through the session as PREFIX__calls.
func inflightAt(t *testing.T, cl *client, prefix string) []string {
	t.Helper()
	r := cl.do(toolCall(`"inflight-probe"`, prefix+"__calls", `{}`))
	var calls struct {
		Inflight []struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inflight"`
	}
	if err := json.Unmarshal([]byte(text(t, r)), &calls); err != nil {
		t.Fatalf("calls: %s: %v", r, err)
	}
	var names []string
	for _, c := range calls.Inflight {
		var p struct{ Name string }
		_ = json.Unmarshal(c.Params, &p)
		names = append(names, c.Method+" "+p.Name)
	}
	return names
}

// withStateless gives a member the stateless path the gateway gives it
// (servers.StatelessSession on its backend).
func withStateless(t *testing.T, m Member) Member {
	t.Helper()
	log, _ := newLog(t)
	m.OpenStateless = servers.StatelessSession(m.Backend.(servers.Server), log)
	return m
}

// gateBackend wraps a real member backend so that a test can hold a
// client request between the endpoint's decision to forward it and the
// member's seeing it: Handle of a request for which hold returns a channel
// waits on it (bounded by the test's wait) before the real Handle.
type gateBackend struct {
	conn.Backend
	hold func(msg *jsonrpc.Message) <-chan struct{}
}

func (g *gateBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	c, err := g.Backend.Open(ctx, general)
	if err != nil {
		return nil, err
	}
	return &gateConn{Conn: c, hold: g.hold}, nil
}

type gateConn struct {
	conn.Conn
	hold func(msg *jsonrpc.Message) <-chan struct{}
}

func (g *gateConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.Kind == jsonrpc.KindRequest {
		if ch := g.hold(msg); ch != nil {
			select {
			case <-ch:
			case <-time.After(wait):
			}
		}
	}
	g.Conn.Handle(ctx, msg, out)
}

// gate holds the first tools/call naming tool (its own name at the member)
// until release; entered is closed when the call reaches the gate.
type gate struct {
	tool     string
	once     sync.Once
	entered  chan struct{}
	released chan struct{}
}

func newGate(tool string) *gate {
	return &gate{tool: tool, entered: make(chan struct{}), released: make(chan struct{})}
}

func (g *gate) hold(msg *jsonrpc.Message) <-chan struct{} {
	if !msg.MethodIs("tools/call") {
		return nil
	}
	name, _, _ := findString(msg.Raw, "params", "name")
	if name != g.tool {
		return nil
	}
	var held <-chan struct{}
	g.once.Do(func() {
		close(g.entered)
		held = g.released
	})
	return held
}

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(wait):
		t.Fatal("the call never reached the member")
	}
}

// countSent returns how many messages sent on s contain sub.
func (s *stream) countSent(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.sends {
		if strings.Contains(string(m), sub) {
			n++
		}
	}
	return n
}
