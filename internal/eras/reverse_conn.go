package eras

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is the reverse bridge: a client of the session eras
// (2024-11-05 … 2025-11-25) served by a server that speaks 2026-07-28,
// which has no initialize, no session and no server requests. The gateway
// plays the session:
//
//   - initialize is answered from the server's server/discover;
//   - every request goes up as a request of the revision of its own (one
//     stateless connection each), its _meta carrying the protocol version,
//     clientInfo and clientCapabilities of the session's initialize and the
//     level of its last logging/setLevel;
//   - an input_required result becomes real server requests on the
//     client's stream (sampling, elicitation, roots); their answers go back
//     in a retry of the original request with the server's requestState,
//     round after round, until a final result, which the client gets with
//     its own id;
//   - ping, logging/setLevel and resources/(un)subscribe, which the
//     revision removed, are answered by the gateway; list_changed and
//     resources/updated notifications reach the session's stream from a
//     subscriptions/listen the gateway holds for it.

// reverseRounds bounds the input_required rounds of one request: a server
// that asks forever gets an error, not a client stuck answering.
const reverseRounds = 10

// errReverseClosed answers a request of a closed reverse session.
var errReverseClosed = errors.New("mcpgate: session closed")

// reverseConn is one session of the older eras on a 2026-07-28 server.
type reverseConn struct {
	// open opens the stateless connection of one request; general is the
	// session's stream for messages not tied to a request.
	open    func(ctx context.Context, general conn.Stream) (conn.StatelessConn, error)
	general conn.Stream
	timeout time.Duration // a request's, input rounds included; 0: none
	log     *slog.Logger
	// onState is told what another replica needs to resume the session
	// after each change of it (reverse_resume.go); nil: no one asks.
	onState func(ReverseSession)

	ctx    context.Context // ends with the session
	cancel context.CancelFunc
	asks   atomic.Uint64 // numbers the gateway's requests to the client and retries

	mu sync.Mutex
	// guarded by mu:
	closed   bool
	version  string                          // negotiated; "" before initialize
	meta     map[string]json.RawMessage      // the revision's _meta of every request
	discover []byte                          // the server's server/discover result
	session  ReverseSession                  // what the last initialize kept (no Level, no Subscriptions)
	telling  bool                            // a goroutine is telling onState (tell)
	retell   bool                            // the state changed while it was
	calls    conn.Calls[reverseCall]         // the session's requests not answered; not guarded by mu
	waiting  map[string]chan json.RawMessage // the client's answers, by the gateway's request id
	subs     map[string]struct{}             // resources/subscribe'd URIs
	listen   context.CancelFunc              // ends the session's listen; nil: none
	// The session's listens, numbered (reverse_listen.go): the newest
	// one, the newest one in effect or given up on, and a channel closed
	// (and replaced) when listenSettled grows.
	listenGen, listenSettled uint64
	listenWake               chan struct{}
}

// NewReverse opens a session of the reverse bridge: open opens the
// stateless connection of one request to the server (general: the
// session's stream for messages not tied to a request), timeout bounds a
// request with its input rounds (0: none).
func NewReverse(open func(context.Context, conn.Stream) (conn.StatelessConn, error), general conn.Stream, timeout time.Duration, log *slog.Logger) conn.Conn {
	return newReverseConn(open, general, timeout, log)
}

func newReverseConn(open func(context.Context, conn.Stream) (conn.StatelessConn, error), general conn.Stream, timeout time.Duration, log *slog.Logger) *reverseConn {
	c := &reverseConn{
		open: open, general: general, timeout: timeout, log: log,
		waiting: map[string]chan json.RawMessage{}, subs: map[string]struct{}{}, listenWake: make(chan struct{}),
		meta: map[string]json.RawMessage{
			protocol.MetaProtocolVersion:    json.RawMessage(strconv.Quote(protocol.StatelessVersion)),
			protocol.MetaClientCapabilities: json.RawMessage(`{}`),
		},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Handle routes one message of the session.
func (c *reverseConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	switch msg.Kind {
	case jsonrpc.KindResponse:
		c.answered(msg)
	case jsonrpc.KindNotification:
		if msg.MethodIs(protocol.NotificationCancelled) {
			c.cancelled(msg.Bytes(msg.CancelRequestID))
		}
		// The rest (initialized, roots/list_changed, progress) has no
		// counterpart in the revision: roots are asked for per request.
	case jsonrpc.KindRequest:
		c.request(ctx, msg, out)
	}
}

func (c *reverseConn) request(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	id := bytes.Clone(msg.Bytes(msg.ID))
	method := msg.MethodName()
	switch {
	case method == protocol.MethodInitialize:
		c.initializeCall(ctx, msg, id, out)
		return
	case method == protocol.MethodPing:
		out.Reply(jsonrpc.Response(id, []byte(`{}`)))
		return
	case method == protocol.MethodLoggingSetLevel:
		out.Reply(c.setLevel(msg, id))
		return
	case method == protocol.MethodResourcesSubscribe || method == protocol.MethodResourcesUnsubscribe:
		c.subscribeCall(msg, id, method == protocol.MethodResourcesSubscribe, out)
		return
	case protocol.IsTaskMethod(method):
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeMethodNotFound,
			"mcpgate: the server speaks "+protocol.StatelessVersion+", which has no "+method+" (tasks are an extension the gateway does not bridge)"))
		return
	}
	callCtx, cancel := c.callContext()
	cl := &conn.Call[reverseCall]{ID: id, Out: out, Cancel: cancel}
	c.mu.Lock()
	closed, meta := c.closed, c.meta
	c.mu.Unlock()
	if closed || !c.calls.Add(cl) {
		cancel()
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, errReverseClosed.Error()))
		return
	}
	go c.run(callCtx, cl, bytes.Clone(msg.Raw), meta)
}

// callContext is the context of one of the session's calls: it ends with
// the session, or after the request timeout.
func (c *reverseConn) callContext() (context.Context, context.CancelFunc) {
	if c.timeout > 0 {
		return context.WithTimeout(c.ctx, c.timeout)
	}
	return context.WithCancel(c.ctx)
}

// initializeCall answers the session's initialize. It waits on the server
// (open, ServerInit: a process still starting) like any request, so it is
// a call of the session: Close answers it before returning, and the wait
// ends with the session or the request's timeout, not only with the
// client's context (which a shutting-down gateway does not end: it would
// have held the POST, unanswered by Close, as long as the server hung).
func (c *reverseConn) initializeCall(ctx context.Context, msg *jsonrpc.Message, id []byte, out conn.Stream) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	if c.timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, c.timeout)
		defer stop()
	}
	cl := &conn.Call[reverseCall]{ID: id, Out: out, Cancel: cancel, Data: reverseCall{initialize: true}}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed || !c.calls.Add(cl) {
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, errReverseClosed.Error()))
		return
	}
	defer c.forget(cl)
	reply := c.initialize(ctx, msg, id)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reply = jsonrpc.ErrorResponse(id, protocol.CodeServerError, fmt.Sprintf("mcpgate: initialize timed out after %v", c.timeout))
	}
	cl.Reply(reply) // nothing if Close answered it
}

// initialize answers the session's initialize from the server's
// server/discover, and keeps what the revision wants in every request.
func (c *reverseConn) initialize(ctx context.Context, msg *jsonrpc.Message, id []byte) []byte {
	var p struct {
		Params struct {
			ProtocolVersion string          `json:"protocolVersion"`
			Capabilities    json.RawMessage `json:"capabilities"`
			ClientInfo      json.RawMessage `json:"clientInfo"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg.Raw, &p); err != nil {
		return jsonrpc.ErrorResponse(id, protocol.CodeInvalidParams, "mcpgate: initialize params: "+err.Error())
	}
	version := p.Params.ProtocolVersion
	if !protocol.IsSessionVersion(version) {
		version = protocol.LatestSessionVersion
	}
	sc, err := c.open(ctx, c.general)
	if err != nil {
		return jsonrpc.ErrorResponse(id, protocol.CodeServerError, err.Error())
	}
	discover, err := sc.ServerInit(ctx)
	sc.Close()
	if err != nil {
		return jsonrpc.ErrorResponse(id, protocol.CodeServerError, err.Error())
	}
	result, err := InitializeResult(discover, version)
	if err != nil {
		return jsonrpc.ErrorResponse(id, protocol.CodeInternalError, "mcpgate: the server's server/discover result: "+err.Error())
	}
	rs := ReverseSession{Version: version}
	if caps := bytes.TrimSpace(p.Params.Capabilities); len(caps) > 0 && caps[0] == '{' {
		rs.Capabilities = caps
	}
	if info := bytes.TrimSpace(p.Params.ClientInfo); len(info) > 0 && info[0] == '{' {
		rs.ClientInfo = info
	}
	meta := rs.meta()
	c.mu.Lock()
	if c.closed { // Close answered it: the session gets no version
		c.mu.Unlock()
		return jsonrpc.ErrorResponse(id, protocol.CodeServerError, errReverseClosed.Error())
	}
	if level, ok := c.meta[protocol.MetaLogLevel]; ok {
		meta[protocol.MetaLogLevel] = level
	}
	c.version, c.meta, c.discover, c.session = version, meta, bytes.Clone(discover), rs
	c.mu.Unlock()
	c.relisten()
	c.tell()
	return jsonrpc.Response(id, result)
}

// setLevel keeps the level for the requests that follow (the revision
// sets it per request).
func (c *reverseConn) setLevel(msg *jsonrpc.Message, id []byte) []byte {
	var p struct {
		Params struct {
			Level json.RawMessage `json:"level"`
		} `json:"params"`
	}
	if json.Unmarshal(msg.Raw, &p) != nil || len(p.Params.Level) == 0 || p.Params.Level[0] != '"' {
		return jsonrpc.ErrorResponse(id, protocol.CodeInvalidParams, "mcpgate: logging/setLevel needs params.level, a string")
	}
	c.mu.Lock()
	meta := make(map[string]json.RawMessage, len(c.meta)+1)
	for k, v := range c.meta {
		meta[k] = v
	}
	meta[protocol.MetaLogLevel] = p.Params.Level
	c.meta = meta // replaced, not changed: calls running hold the old one
	c.mu.Unlock()
	c.tell()
	return jsonrpc.Response(id, []byte(`{}`))
}

// Version is the version negotiated by initialize.
func (c *reverseConn) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Abandon cancels the requests whose answers were to go to out, without
// answering them: their client left.
func (c *reverseConn) Abandon(out conn.Stream) { c.calls.Abandon(out) }

// cancelled ends the request the client cancelled (notifications/
// cancelled): it gets no answer, and its stateless request upstream is
// cancelled with it.
func (c *reverseConn) cancelled(id []byte) {
	if len(id) == 0 {
		return
	}
	found := c.calls.Find(func(cl *conn.Call[reverseCall]) bool { return !cl.Data.initialize && bytes.Equal(cl.ID, id) })
	if found != nil {
		found.Reply(nil) // and its Cancel ends its stateless request
	}
}

func (c *reverseConn) Close() { c.CloseWith("") }

// CloseWith answers every request still running with an error naming
// reason, and cancels it and the session's listen. It does not wait for
// the server.
func (c *reverseConn) CloseWith(reason string) {
	text := errReverseClosed.Error()
	if reason != "" {
		text = "mcpgate: " + reason
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.calls.Close(protocol.CodeServerError, text) // cancels each call's context
	c.cancel()                                    // and the listen's and the asks'
}

// forget ends a finished call's context (its answer took it out of the
// table).
func (c *reverseConn) forget(cl *conn.Call[reverseCall]) { cl.Cancel() }

// reverseCall is what the session keeps of a request in its table.
type reverseCall struct {
	// initialize: the session's initialize, which its client may not
	// cancel (notifications/cancelled ignores it).
	initialize bool
}

// nextID returns a fresh id of the gateway's for a request of kind
// ("ask", "retry", "listen"), as JSON.
func (c *reverseConn) nextID(kind string) []byte {
	return strconv.AppendQuote(nil, fmt.Sprintf("mcpgate-%s-%d", kind, c.asks.Add(1)))
}

// Interface guards.
var _ conn.Conn = (*reverseConn)(nil)
