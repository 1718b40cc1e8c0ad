package eras

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
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

	ctx    context.Context // ends with the session
	cancel context.CancelFunc
	asks   atomic.Uint64 // numbers the gateway's requests to the client and retries

	mu sync.Mutex
	// guarded by mu:
	closed   bool
	version  string                     // negotiated; "" before initialize
	meta     map[string]json.RawMessage // the revision's _meta of every request
	discover []byte                     // the server's server/discover result
	calls    map[*reverseCall]struct{}
	waiting  map[string]chan json.RawMessage // the client's answers, by the gateway's request id
	subs     map[string]struct{}             // resources/subscribe'd URIs
	listen   context.CancelFunc              // ends the session's listen; nil: none
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
		calls: map[*reverseCall]struct{}{}, waiting: map[string]chan json.RawMessage{}, subs: map[string]struct{}{},
		meta: map[string]json.RawMessage{
			KeyProtocolVersion:    json.RawMessage(strconv.Quote(Version)),
			KeyClientCapabilities: json.RawMessage(`{}`),
		},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// reverseCall is one request of the session in flight.
type reverseCall struct {
	id     []byte // the client's, byte for byte
	out    conn.Stream
	cancel context.CancelFunc

	// initialize: the session's initialize, which its client may not
	// cancel (notifications/cancelled ignores it).
	initialize bool

	mu   sync.Mutex // held while delivering to out, so nothing follows the final answer
	done bool       // guarded by mu
}

func (cl *reverseCall) send(msg []byte) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if !cl.done {
		cl.out.Send(msg)
	}
}

// reply gives the request its final answer (nil: it was cancelled by its
// client) unless it has one or was abandoned.
func (cl *reverseCall) reply(msg []byte) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if !cl.done {
		cl.done = true
		cl.out.Reply(msg)
	}
}

func (cl *reverseCall) fail(code int, text string) {
	cl.reply(jsonrpc.ErrorResponse(cl.id, code, text))
}

// Handle routes one message of the session.
func (c *reverseConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	switch msg.Kind {
	case jsonrpc.KindResponse:
		c.answered(msg)
	case jsonrpc.KindNotification:
		if msg.MethodIs("notifications/cancelled") {
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
	case method == "initialize":
		c.initializeCall(ctx, msg, id, out)
		return
	case method == "ping":
		out.Reply(jsonrpc.Response(id, []byte(`{}`)))
		return
	case method == "logging/setLevel":
		out.Reply(c.setLevel(msg, id))
		return
	case method == "resources/subscribe" || method == "resources/unsubscribe":
		out.Reply(c.subscribe(msg, id, method == "resources/subscribe"))
		return
	case strings.HasPrefix(method, "tasks/"):
		out.Reply(jsonrpc.ErrorResponse(id, jsonrpc.CodeMethodNotFound,
			"mcpgate: the server speaks "+Version+", which has no "+method+" (tasks are an extension the gateway does not bridge)"))
		return
	}
	cl := &reverseCall{id: id, out: out}
	var callCtx context.Context
	var cancel context.CancelFunc
	if c.timeout > 0 {
		callCtx, cancel = context.WithTimeout(c.ctx, c.timeout)
	} else {
		callCtx, cancel = context.WithCancel(c.ctx)
	}
	cl.cancel = cancel
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		cl.fail(jsonrpc.CodeServerError, errReverseClosed.Error())
		return
	}
	c.calls[cl] = struct{}{}
	meta := c.meta
	c.mu.Unlock()
	go c.run(callCtx, cl, bytes.Clone(msg.Raw), meta)
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
	cl := &reverseCall{id: id, out: out, cancel: cancel, initialize: true}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cl.fail(jsonrpc.CodeServerError, errReverseClosed.Error())
		return
	}
	c.calls[cl] = struct{}{}
	c.mu.Unlock()
	defer c.forget(cl)
	reply := c.initialize(ctx, msg, id)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reply = jsonrpc.ErrorResponse(id, jsonrpc.CodeServerError, fmt.Sprintf("mcpgate: initialize timed out after %v", c.timeout))
	}
	cl.reply(reply) // nothing if Close answered it
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
		return jsonrpc.ErrorResponse(id, jsonrpc.CodeInvalidParams, "mcpgate: initialize params: "+err.Error())
	}
	version := p.Params.ProtocolVersion
	if !slices.Contains(LegacyVersions, version) {
		version = LegacyVersions[len(LegacyVersions)-1] // the latest
	}
	sc, err := c.open(ctx, c.general)
	if err != nil {
		return jsonrpc.ErrorResponse(id, jsonrpc.CodeServerError, err.Error())
	}
	discover, err := sc.ServerInit(ctx)
	sc.Close()
	if err != nil {
		return jsonrpc.ErrorResponse(id, jsonrpc.CodeServerError, err.Error())
	}
	result, err := InitializeResult(discover, version)
	if err != nil {
		return jsonrpc.ErrorResponse(id, jsonrpc.CodeInternalError, "mcpgate: the server's server/discover result: "+err.Error())
	}
	meta := map[string]json.RawMessage{
		KeyProtocolVersion:    json.RawMessage(strconv.Quote(Version)),
		KeyClientCapabilities: json.RawMessage(`{}`),
	}
	if caps := bytes.TrimSpace(p.Params.Capabilities); len(caps) > 0 && caps[0] == '{' {
		meta[KeyClientCapabilities] = caps
	}
	if info := bytes.TrimSpace(p.Params.ClientInfo); len(info) > 0 && info[0] == '{' {
		meta[KeyClientInfo] = info
	}
	c.mu.Lock()
	if c.closed { // Close answered it: the session gets no version
		c.mu.Unlock()
		return jsonrpc.ErrorResponse(id, jsonrpc.CodeServerError, errReverseClosed.Error())
	}
	if level, ok := c.meta[KeyLogLevel]; ok {
		meta[KeyLogLevel] = level
	}
	c.version, c.meta, c.discover = version, meta, bytes.Clone(discover)
	c.mu.Unlock()
	c.relisten()
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
		return jsonrpc.ErrorResponse(id, jsonrpc.CodeInvalidParams, "mcpgate: logging/setLevel needs params.level, a string")
	}
	c.mu.Lock()
	meta := make(map[string]json.RawMessage, len(c.meta)+1)
	for k, v := range c.meta {
		meta[k] = v
	}
	meta[KeyLogLevel] = p.Params.Level
	c.meta = meta // replaced, not changed: calls running hold the old one
	c.mu.Unlock()
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
func (c *reverseConn) Abandon(out conn.Stream) {
	c.mu.Lock()
	var mine []*reverseCall
	for cl := range c.calls {
		if cl.out == out {
			mine = append(mine, cl)
			delete(c.calls, cl)
		}
	}
	c.mu.Unlock()
	for _, cl := range mine {
		cl.mu.Lock()
		cl.done = true
		cl.mu.Unlock()
		cl.cancel()
	}
}

// cancelled ends the request the client cancelled (notifications/
// cancelled): it gets no answer, and its stateless request upstream is
// cancelled with it.
func (c *reverseConn) cancelled(id []byte) {
	if len(id) == 0 {
		return
	}
	c.mu.Lock()
	var found *reverseCall
	for cl := range c.calls {
		if !cl.initialize && bytes.Equal(cl.id, id) {
			found = cl
			break
		}
	}
	c.mu.Unlock()
	if found != nil {
		found.reply(nil)
		found.cancel()
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
	calls := c.calls
	c.calls = map[*reverseCall]struct{}{}
	c.mu.Unlock()
	for cl := range calls {
		cl.fail(jsonrpc.CodeServerError, text)
	}
	c.cancel() // every call's context, the listen's and the asks'
}

// forget removes a finished call.
func (c *reverseConn) forget(cl *reverseCall) {
	c.mu.Lock()
	delete(c.calls, cl)
	c.mu.Unlock()
	cl.cancel()
}

// nextID returns a fresh id of the gateway's for a request of kind
// ("ask", "retry", "listen"), as JSON.
func (c *reverseConn) nextID(kind string) []byte {
	return strconv.AppendQuote(nil, fmt.Sprintf("mcpgate-%s-%d", kind, c.asks.Add(1)))
}

// Interface guards.
var (
	_ conn.Conn          = (*reverseConn)(nil)
	_ conn.ConnCloseWith = (*reverseConn)(nil)
)
