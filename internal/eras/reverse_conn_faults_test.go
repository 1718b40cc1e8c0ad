package eras

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"go.uber.org/goleak"
)

// Attack tests of the reverse bridge (reverse.go, reverse_call.go,
// reverse_listen.go) at its unit boundary: the server is a scripted
// conn.StatelessConn (revServer, one revSC per stateless request the
// bridge opens), the client a recording mux.Stream (revStream). Every test
// checks that no goroutine outlives what it started (goleak, against the
// goroutines running when the test began).

// --- the scripted 2026-07-28 server ---------------------------------------

const (
	// revDiscoverPlain announces nothing a listen is needed for.
	revDiscoverPlain = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"rev","version":"1"}}}`
	// revDiscoverListen announces tools/list_changed and subscriptions.
	revDiscoverListen = `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"rev","version":"1"}}}`
)

type revServer struct {
	mu        sync.Mutex
	discover  []byte
	initErr   error
	initBlock bool                // ServerInit waits for its context
	openErr   error               // open fails with it
	openGate  chan struct{}       // non-nil: open waits for it, ignoring its context
	respond   func(a *revAttempt) // called by Handle (nil: the test answers)
	opened    int
	inits     int           // ServerInit calls entered
	attempts  []*revAttempt // requests other than subscriptions/listen
	listens   []*revAttempt // subscriptions/listen requests
	conns     []*revSC
}

func newRevServer(discover string) *revServer { return &revServer{discover: []byte(discover)} }

func (s *revServer) open(ctx context.Context, general conn.Stream) (conn.StatelessConn, error) {
	s.mu.Lock()
	gate, err := s.openGate, s.openErr
	s.opened++
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if err != nil {
		return toStateless(nil, err)
	}
	sc := &revSC{srv: s}
	s.mu.Lock()
	s.conns = append(s.conns, sc)
	s.mu.Unlock()
	return toStateless(sc, nil)
}

func (s *revServer) count() (attempts, listens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.attempts), len(s.listens)
}

// attempt waits for the n-th (1-based) request other than a listen.
func (s *revServer) attempt(t *testing.T, n int) *revAttempt {
	t.Helper()
	var a *revAttempt
	testkit.WaitFor(t, fmt.Sprintf("attempt %d", n), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.attempts) >= n {
			a = s.attempts[n-1]
		}
		return a != nil
	})
	return a
}

// listen waits for the n-th (1-based) subscriptions/listen.
func (s *revServer) listen(t *testing.T, n int) *revAttempt {
	t.Helper()
	var a *revAttempt
	testkit.WaitFor(t, fmt.Sprintf("listen %d", n), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.listens) >= n {
			a = s.listens[n-1]
		}
		return a != nil
	})
	return a
}

// revSC is one stateless connection of the scripted server.
type revSC struct {
	srv    *revServer
	closed atomic.Bool
}

type revAttempt struct {
	sc        *revSC
	ctx       context.Context
	raw       []byte
	id        []byte
	method    string
	out       conn.Stream
	abandoned atomic.Bool
}

func (sc *revSC) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.Kind != jsonrpc.KindRequest {
		return
	}
	a := &revAttempt{sc: sc, ctx: ctx, raw: append([]byte(nil), msg.Raw...), id: append([]byte(nil), msg.Bytes(msg.ID)...),
		method: msg.MethodName(), out: out}
	sc.srv.mu.Lock()
	if a.method == "subscriptions/listen" {
		sc.srv.listens = append(sc.srv.listens, a)
	} else {
		sc.srv.attempts = append(sc.srv.attempts, a)
	}
	respond := sc.srv.respond
	sc.srv.mu.Unlock()
	if respond != nil && a.method != "subscriptions/listen" {
		respond(a)
	}
}

func (sc *revSC) Version() string { return "2026-07-28" }

func (sc *revSC) Abandon(out conn.Stream) {
	sc.srv.mu.Lock()
	defer sc.srv.mu.Unlock()
	for _, a := range append(slices.Clone(sc.srv.attempts), sc.srv.listens...) {
		if a.sc == sc && a.out == out {
			a.abandoned.Store(true)
		}
	}
}

func (sc *revSC) Close()           { sc.closed.Store(true) }
func (sc *revSC) CloseWith(string) { sc.Close() }

func (sc *revSC) ServerInit(ctx context.Context) ([]byte, error) {
	sc.srv.mu.Lock()
	sc.srv.inits++
	block, d, err := sc.srv.initBlock, sc.srv.discover, sc.srv.initErr
	sc.srv.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return d, err
}

func (sc *revSC) Passthrough() bool { return true }

// params returns the attempt's params members.
func (a *revAttempt) params(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	var r struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(a.raw, &r); err != nil {
		t.Fatalf("attempt %s: %v", a.raw, err)
	}
	return r.Params
}

func (a *revAttempt) meta(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	m := map[string]json.RawMessage{}
	if raw, ok := a.params(t)["_meta"]; ok {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("attempt _meta %s: %v", raw, err)
		}
	}
	return m
}

// reply gives the attempt its final answer, with its own id.
func (a *revAttempt) reply(result string) { a.out.Reply(jsonrpc.Response(a.id, []byte(result))) }

// inputRequired answers the attempt input_required.
func (a *revAttempt) inputRequired(requests, state string) {
	r := `{"resultType":"input_required"`
	if requests != "" {
		r += `,"inputRequests":` + requests
	}
	if state != "" {
		r += `,"requestState":` + state
	}
	a.reply(r + "}")
}

func (a *revAttempt) done() bool { return a.abandoned.Load() && a.sc.closed.Load() }

// --- the client's side -----------------------------------------------------

// revStream records what a client's stream gets; a nil Reply is recorded
// as "" (the request ended without an answer: its client cancelled it).
// With answer set, it answers the gateway's requests as they come, from
// inside Send (the tightest a client can be).
type revStream struct {
	mu      sync.Mutex
	sends   []string
	replies []string
	answer  func(id []byte, method string) []byte // a response, nil: none
	conn    *reverseConn
}

func (r *revStream) Send(msg []byte) {
	r.mu.Lock()
	r.sends = append(r.sends, string(msg))
	answer, conn := r.answer, r.conn
	r.mu.Unlock()
	if answer == nil {
		return
	}
	m, err := jsonrpc.Parse(msg)
	if err != nil || m.Kind != jsonrpc.KindRequest {
		return
	}
	if resp := answer(m.Bytes(m.ID), m.MethodName()); resp != nil {
		revHandle(conn, string(resp), nil)
	}
}

func (r *revStream) Reply(msg []byte) {
	r.mu.Lock()
	r.replies = append(r.replies, string(msg))
	r.mu.Unlock()
}

func (r *revStream) got() (sends, replies []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sends), slices.Clone(r.replies)
}

// asks returns the gateway's requests among the sends, in order.
func (r *revStream) asks() []jsonrpc.Message {
	sends, _ := r.got()
	var out []jsonrpc.Message
	for _, s := range sends {
		if m, err := jsonrpc.Parse([]byte(s)); err == nil && m.Kind == jsonrpc.KindRequest {
			out = append(out, m)
		}
	}
	return out
}

// waitAsks waits for n gateway requests and returns them.
func (r *revStream) waitAsks(t *testing.T, n int) []jsonrpc.Message {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%d asks", n), func() bool { return len(r.asks()) >= n })
	return r.asks()
}

// reply waits for the first reply.
func (r *revStream) reply(t *testing.T) string {
	t.Helper()
	testkit.WaitFor(t, "a reply", func() bool { _, replies := r.got(); return len(replies) > 0 })
	_, replies := r.got()
	return replies[0]
}

func (r *revStream) replyCount() int { _, replies := r.got(); return len(replies) }

// --- helpers ----------------------------------------------------------------

// revLeaks returns a check that no goroutine started since is left.
func revLeaks(t *testing.T) func() {
	opt := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		goleak.VerifyNone(t, opt)
	}
}

func newRevConn(t *testing.T, srv *revServer, timeout time.Duration) (*reverseConn, *revStream) {
	general := &revStream{}
	c := newReverseConn(func(ctx context.Context, g conn.Stream) (conn.StatelessConn, error) {
		if g != general {
			t.Errorf("open got a stream other than the session's general stream")
		}
		return srv.open(ctx, g)
	}, general, timeout, testLogger(t))
	return c, general
}

func revHandle(c *reverseConn, raw string, out conn.Stream) {
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		panic(fmt.Sprintf("%s: %v", raw, err))
	}
	c.Handle(context.Background(), &m, out)
}

const revInitialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{},"roots":{}},"clientInfo":{"name":"attacker","version":"9"}}}`

func revInit(t *testing.T, c *reverseConn) {
	t.Helper()
	out := &revStream{}
	revHandle(c, revInitialize, out)
	if got := out.reply(t); !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %s", got)
	}
}

// revCall returns a tools/call request with id (raw JSON) and argument n.
func revCall(id string, n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"t","arguments":{"n":%d}}}`, id, n)
}

type revAnswer struct {
	id      []byte
	code    int
	message string
	result  json.RawMessage
}

// revParse parses a reply to the client; it must be one with an id.
func revParse(t *testing.T, raw string) revAnswer {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil || m.Kind != jsonrpc.KindResponse {
		t.Fatalf("not a response: %q (%v)", raw, err)
	}
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Raw, &r); err != nil {
		t.Fatal(err)
	}
	a := revAnswer{id: m.Bytes(m.ID), result: r.Result}
	if r.Error != nil {
		a.code, a.message = r.Error.Code, r.Error.Message
	}
	return a
}

// revWantError checks that raw is an error to id with code and text in it.
func revWantError(t *testing.T, raw, id string, code int, text string) {
	t.Helper()
	a := revParse(t, raw)
	if string(a.id) != id || a.code != code || !strings.Contains(a.message, text) {
		t.Fatalf("want error %d %q to id %s, got %s", code, text, id, raw)
	}
}

// revResponse is the client's answer to a gateway request.
func revResponse(id []byte, result string) string {
	return string(jsonrpc.Response(id, []byte(result)))
}

// testLogger sends warnings and errors to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// toStateless returns the conn.StatelessConn of c (a fake of the tests),
// or err.
func toStateless(c interface {
	conn.Conn
	ServerInit(context.Context) ([]byte, error)
	Passthrough() bool
}, err error) (conn.StatelessConn, error) {
	if err != nil {
		return conn.StatelessConn{}, err
	}
	return conn.NewStatelessConn(c, c.ServerInit, c.Passthrough()), nil
}
