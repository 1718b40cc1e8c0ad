package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// gatewayCapabilities are the client capabilities the gateway declares to a
// shared upstream: all it can route to some session.
const gatewayCapabilities = `{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}}`

// unroutable are server capabilities a shared upstream may have that the
// gateway cannot route per session, so it does not advertise them:
// experimental features are the process's own. (Tasks are: each belongs to
// the session that created it, tasks.go.)
var unroutable = []string{"experimental"}

// initializeUpstream brings generation gen to the ready state as its mode
// does: in shared mode by the gateway's own initialize; in exclusive mode
// by replaying the client's initialize after a restart (the first one is
// the client's own). It is bounded by Options.InitTimeout; on failure the
// caller (runGen) arranges the retry. A Modern Mux probes instead
// (runModernGen).
func (m *Mux) initializeUpstream(gen uint64) error {
	if m.mode == modeExclusive {
		return m.replayInitialize(gen)
	}
	return m.initializeShared(gen)
}

// initializeShared initializes generation gen with the gateway's own
// initialize, keeps its result for the clients' initialize, and restores
// the sessions' subscriptions and logging level on it.
func (m *Mux) initializeShared(gen uint64) error {
	caps := m.opts.ClientCapabilities
	if caps == nil {
		caps = []byte(gatewayCapabilities)
	}
	params := fmt.Appendf(nil, `{"protocolVersion":%q,"capabilities":%s,"clientInfo":{"name":"mcpgate","version":%q}}`,
		protocol.LatestSessionVersion, caps, m.opts.Version)
	reply, err := m.roundTrip(gen, protocol.MethodInitialize, params, m.opts.InitTimeout)
	if err == nil {
		err = m.storeInit(reply)
	}
	if err != nil {
		return fmt.Errorf("initialize failed: %w", err)
	}
	if !m.sendInitialized(gen) {
		return errGenGone
	}
	if !m.markReady(gen) {
		return errGenGone
	}
	m.logReady(gen)
	m.restoreState()
	return nil
}

// replayInitialize initializes generation gen of an exclusive Mux with its
// client's initialize, when there was one: the first generation is ready
// at once, and the client's own initialize is forwarded to it.
func (m *Mux) replayInitialize(gen uint64) error {
	var params []byte
	m.mu.Lock()
	for c := range m.clients {
		params = c.init
	}
	m.mu.Unlock()
	if params == nil {
		if !m.markReady(gen) {
			return errGenGone
		}
		return nil
	}
	if _, err := m.roundTrip(gen, "initialize", params, m.opts.InitTimeout); err != nil {
		return fmt.Errorf("initialize failed: %w", err)
	}
	if !m.sendInitialized(gen) {
		return errGenGone
	}
	// The replay's is the generation's: neither the session's next
	// request nor the client's own late one sends another.
	m.mu.Lock()
	for c := range m.clients {
		c.initGen = gen
	}
	m.mu.Unlock()
	if !m.markReady(gen) {
		return errGenGone
	}
	m.logReady(gen)
	return nil
}

// sendInitialized sends notifications/initialized after generation gen
// answered the initialize, and reports false, sending nothing, when gen was
// replaced since: a successor (which gets its own initialize first) must
// not get anything of gen's, not initialized, not the restored state.
// Checked again by markReady; only the few instructions between this
// check and the write remain racy.
func (m *Mux) sendInitialized(gen uint64) bool {
	if !m.current(gen) {
		return false
	}
	m.trySend(jsonrpc.Notification("notifications/initialized", nil), "notifications/initialized")
	return true
}

// errGenGone says a generation exited (or was replaced) before it was ready:
// nothing to retry, its successor initializes itself.
var errGenGone = errors.New("process generation gone before it was ready")

// goneError is a round trip failed because its process generation ended:
// it matches errExited, and reads as the cause alone (an ExitError already
// says the process exited).
type goneError struct{ cause error }

func (e *goneError) Error() string        { return e.cause.Error() }
func (e *goneError) Is(target error) bool { return target == errExited }
func (e *goneError) Unwrap() error        { return e.cause }

// current reports whether gen is the running generation and the Mux is open.
func (m *Mux) current(gen uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.closed && m.gen == gen && m.running
}

// rpcError is an error answer of the server to one of the gateway's own
// requests, with the server's code and message.
type rpcError struct {
	Code    int
	Message string
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("the server answered with error %d: %s", e.Code, e.Message)
}

// refusedErr reports whether err (a State's Reason) is the server's error
// answer to the gateway's own request, its initialize among them, rather
// than a crash, a timeout or a shutdown: a server of 2026-07-28 alone
// refuses initialize so.
func refusedErr(err error) bool {
	var re *rpcError
	return errors.As(err, &re)
}

// InitRefused returns the server's error answer to the gateway's
// initialize since the server was last ready, or nil: a server that
// refuses initialize may speak 2026-07-28 alone.
func (m *Mux) InitRefused() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused
}

// errorOf decodes an error response (slow path only).
func errorOf(raw []byte) *rpcError {
	var env struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &env)
	return &rpcError{Code: env.Error.Code, Message: env.Error.Message}
}

// roundTrip sends the gateway's own request to generation gen and waits for
// its result, at most timeout (its own, not Options.Timeout: it is not in
// the deadline list). An error answer of the server is an *rpcError; a
// call the Mux failed itself (the process exited, Close) wraps errExited
// or is errClosed, so that it never reads as the server's answer.
func (m *Mux) roundTrip(gen uint64, method string, params []byte, timeout time.Duration) ([]byte, error) {
	return m.roundTripCtx(m.ctx, gen, method, params, timeout)
}

// roundTripCtx is roundTrip also bounded by parent (a client request's
// context, for a request made on its behalf); it always ends when the Mux
// closes.
func (m *Mux) roundTripCtx(parent context.Context, gen uint64, method string, params []byte, timeout time.Duration) ([]byte, error) {
	type answer struct {
		result []byte
		err    error
	}
	done := make(chan answer, 1)
	c := &call{onReply: func(msg *jsonrpc.Message) {
		if msg.IsError {
			done <- answer{err: errorOf(msg.Raw)}
			return
		}
		done <- answer{result: bytes.Clone(resultOf(msg.Raw))}
	}, onGone: func(err error) {
		if !errors.Is(err, errClosed) {
			err = &goneError{err}
		}
		done <- answer{err: err}
	}}
	m.mu.Lock()
	if m.closed || m.gen != gen || !m.running {
		m.mu.Unlock()
		return nil, errExited
	}
	m.registerUntimedLocked(c)
	c.sent = true
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	up := m.upstream(ctx)
	if up == nil {
		m.finish(c.upID, func(*call) {})
		if m.ctx.Err() != nil {
			return nil, errClosed
		}
		return nil, fmt.Errorf("writing %s: %w", method, errNoUpstream)
	}
	if !m.isPending(c.upID) {
		// Failed while waiting for the upstream (gen exited before
		// SetUpstream): its answer is in done; writing now would reach
		// a successor.
		a := <-done
		return a.result, a.err
	}
	msg := jsonrpc.Request(appendUint(nil, c.upID), method, params)
	if err := up.SendGen(ctx, gen, msg); err != nil {
		m.finish(c.upID, func(*call) {})
		if m.ctx.Err() != nil {
			return nil, errClosed
		}
		return nil, fmt.Errorf("writing %s: %w", method, err)
	}
	select {
	case a := <-done:
		return a.result, a.err
	case <-ctx.Done():
		m.finish(c.upID, func(*call) {})
		if m.ctx.Err() != nil {
			return nil, errClosed
		}
		if parent.Err() != nil {
			return nil, fmt.Errorf("no %s reply: %w", method, parent.Err())
		}
		return nil, fmt.Errorf("no %s reply within %v", method, timeout)
	}
}

// internal sends the gateway's own request, best effort, and ignores the
// reply.
func (m *Mux) internal(method string, params []byte) {
	c := &call{}
	m.mu.Lock()
	if m.closed || !m.readyLocked() {
		m.mu.Unlock()
		return // a process that is not ready gets this state when it is
	}
	m.registerLocked(c)
	c.sent = true
	m.mu.Unlock()
	if !m.trySend(jsonrpc.Request(appendUint(nil, c.upID), method, params), method) {
		m.finish(c.upID, func(*call) {})
	}
}

// markReady records that generation gen is initialized: requests waiting
// for it proceed. It reports false when gen is gone (or the Mux closed).
func (m *Mux) markReady(gen uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.gen != gen || !m.running {
		return false // the process is gone: waiters wait for the next one
	}
	m.readyGen, m.initFails, m.refused, m.everReady = gen, 0, nil, true
	m.setStateLocked(Ready, nil, time.Time{})
	close(m.ready)
	m.ready = make(chan struct{})
	close(m.ready) // stays closed while gen is ready
	return true
}

// storeInit keeps a shared upstream's initialize result. It must be a JSON
// object: each client's initialize is answered by editing it as a map, and
// null decodes without error into a nil one.
func (m *Mux) storeInit(result []byte) error {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(result, &obj); err != nil || obj == nil {
		return fmt.Errorf("initialize result is not a JSON object: %.64s", result)
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return fmt.Errorf("initialize result: %w", err)
	}
	m.mu.Lock()
	m.initResult, m.upVersion = result, r.ProtocolVersion
	m.mu.Unlock()
	return nil
}

// restoreState re-applies the logging level and subscriptions to a
// restarted process.
func (m *Mux) restoreState() {
	m.mu.Lock()
	uris := make([]string, 0, len(m.subs))
	for uri := range m.subs {
		uris = append(uris, uri)
	}
	m.level = -1
	m.mu.Unlock()
	for _, uri := range uris {
		m.internal(protocol.MethodResourcesSubscribe, uriParams(uri))
	}
	if err := m.applyLevel(m.ctx); err != nil {
		m.log.Warn("logging level not restored after a restart", "err", err)
	}
}

// initialize answers a client's initialize in shared mode from the
// upstream's result, with the version negotiated for this client.
func (c *Client) initialize(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	m := c.m
	id := msg.Bytes(msg.ID)
	if err := c.waitReady(ctx); err != nil {
		out.Reply(errorReply(id, protocol.CodeServerError, err))
		return
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	params := paramsOf(msg.Raw)
	_ = json.Unmarshal(params, &p)
	caps := parseCapabilities(params)
	m.mu.Lock()
	result, upVersion := m.initResult, m.upVersion
	c.caps = caps // server requests needing others are never routed here
	m.mu.Unlock()
	version := Negotiate(p.ProtocolVersion, upVersion)
	var r map[string]json.RawMessage
	if err := json.Unmarshal(result, &r); err != nil || r == nil {
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeInternalError, "mcpgate: bad upstream initialize result"))
		return
	}
	r["protocolVersion"], _ = json.Marshal(version)
	if caps, ok := r["capabilities"]; ok {
		var cm map[string]json.RawMessage
		if json.Unmarshal(caps, &cm) == nil {
			for _, k := range unroutable {
				delete(cm, k)
			}
			r["capabilities"], _ = json.Marshal(cm)
		}
	}
	body, _ := json.Marshal(r)
	m.mu.Lock()
	c.version = version
	m.mu.Unlock()
	out.Reply(jsonrpc.Response(id, body))
}

// Negotiate picks the version for a client that asked for requested, behind
// an upstream that agreed to upstream: the requested one when the gateway
// and the upstream both speak it, else the newest both speak.
func Negotiate(requested, upstream string) string {
	if upstream == "" || !protocol.IsSessionVersion(upstream) {
		upstream = protocol.LatestSessionVersion
	}
	if protocol.IsSessionVersion(requested) && requested <= upstream {
		return requested
	}
	return upstream
}

// recordInit keeps the client's initialize (exclusive mode) for replay after
// a restart, and its negotiated version from the reply.
func (c *Client) recordInit(msg *jsonrpc.Message) func(*jsonrpc.Message) {
	params := bytes.Clone(paramsOf(msg.Raw))
	return func(reply *jsonrpc.Message) {
		if reply.IsError {
			return
		}
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(resultOf(reply.Raw), &r)
		c.m.mu.Lock()
		c.init, c.version = params, r.ProtocolVersion
		c.m.mu.Unlock()
	}
}

// subscribe reference-counts resource subscriptions: only the first
// subscriber of a URI subscribes upstream and only the last one unsubscribes.
func (c *Client) subscribe(ctx context.Context, msg *jsonrpc.Message, out conn.Stream, on bool) {
	m := c.m
	var p struct {
		URI string `json:"uri"`
	}
	id := msg.Bytes(msg.ID)
	if json.Unmarshal(paramsOf(msg.Raw), &p) != nil || p.URI == "" {
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeInvalidParams, "invalid params: uri is required"))
		return
	}
	m.mu.Lock()
	if c.closed {
		// Neither counted nor sent: a closed session holds no
		// subscription (its close released them), and gets no updates.
		err := c.closedErrLocked()
		m.mu.Unlock()
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, err.Error()))
		return
	}
	forward := false
	switch {
	case on && !c.subs[p.URI]:
		forward = m.subscribeLocked(c, p.URI)
	case !on && c.subs[p.URI]:
		forward = m.unsubscribeLocked(c, p.URI)
	}
	m.mu.Unlock()
	if !forward {
		out.Reply(jsonrpc.Response(id, []byte(`{}`)))
		return
	}
	c.forward(ctx, msg, out, func(reply *jsonrpc.Message) {
		if !reply.IsError || !on {
			return
		}
		m.mu.Lock() // the upstream refused: undo
		if c.subs[p.URI] {
			m.unsubscribeLocked(c, p.URI)
		}
		m.mu.Unlock()
	})
}

// subscribeLocked records c's subscription to uri, in c.subs and in
// m.subs (the subscribers of each URI, so that an update goes to them
// without looking at every client); true when c is uri's first, whose
// subscription goes upstream. unsubscribeLocked undoes it; true when c
// was the last.
func (m *Mux) subscribeLocked(c *Client, uri string) bool {
	if c.subs == nil {
		c.subs = map[string]bool{}
	}
	c.subs[uri] = true
	subs := m.subs[uri]
	if subs == nil {
		subs = map[*Client]struct{}{}
		m.subs[uri] = subs
	}
	subs[c] = struct{}{}
	return len(subs) == 1
}

func (m *Mux) unsubscribeLocked(c *Client, uri string) bool {
	delete(c.subs, uri)
	subs := m.subs[uri]
	delete(subs, c)
	if len(subs) > 0 {
		return false
	}
	delete(m.subs, uri)
	return true
}

// resultOf returns the raw result of a response (slow path only).
func resultOf(raw []byte) []byte {
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Result
}
