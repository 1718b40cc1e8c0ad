package mux

import (
	"bytes"
	"context"
	"errors"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// Client is one client session on a Mux. Its methods are safe for
// concurrent use.
type Client struct {
	m       *Mux
	general conn.Stream
	// guarded by m.mu:
	//
	// ctx is canceled by Close: requests of the session waiting for the
	// server (to be ready, for a level change) end at once. Made on
	// first use (lifetime); nil until then.
	ctx      context.Context
	stop     context.CancelFunc
	closed   bool
	closeErr error            // why it closed, for its requests: errSessionClosed or CloseWith's reason
	calls    map[idKey]*call  // the client's raw id -> its call in flight
	long     map[string]*call // the same, for ids too long for an idKey (made on first use)
	latest   *call            // the most recent call in flight, for attribution
	written  int              // calls written upstream and not finished (not queued ones)
	caps     capability       // shared mode: client capabilities declared in initialize
	queue    []*call          // calls waiting for an upstream slot (MaxInFlight)
	subs     map[string]bool  // resource URIs subscribed (made on first use)
	level    int              // logging level asked for; -1 none
	version  string           // negotiated protocol version
	init     []byte           // exclusive mode: the client's initialize, replayed after a restart
	tasks    []string         // shared mode: the tasks it created, oldest first (tasks.go)
	// exclusive mode: the process generation that was sent
	// notifications/initialized for the client's initialize (the client's
	// own, the gateway's before its first request, or the replay's after a
	// restart); 0: none yet. One per generation, never two.
	initGen uint64
	// initWritten, while not nil, is closed once the notifications/initialized
	// claimed for initGen is handed to the upstream: the session's other
	// requests wait for it (initHeld of them), so that none overtakes it.
	initWritten chan struct{}
	initHeld    int
}

// lifetime returns a context that ends when c is closed (already ended if
// it is), made on first use: only a request that waits (for the server to
// be ready, for a logging level) needs one, and a 2026-07-28 request joins
// a Client of its own.
func (c *Client) lifetime() context.Context {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.ctx == nil {
		c.ctx, c.stop = context.WithCancel(context.Background())
		if c.closed {
			c.stop()
		}
	}
	return c.ctx
}

// Join adds a client session; messages not tied to one of its requests go to
// general.
func (m *Mux) Join(general conn.Stream) *Client {
	c := &Client{m: m, general: general, calls: map[idKey]*call{}, level: -1}
	m.mu.Lock()
	m.clients[c] = struct{}{}
	m.mu.Unlock()
	return c
}

// Stateless makes c a client that never initializes: the connection of
// one request of a stateless protocol version (2026-07-28), which names its
// version and its capabilities (caps, the raw JSON object of
// io.modelcontextprotocol/clientCapabilities) in the request itself. A
// server request needing a capability caps lists may be routed to c as to
// any session; the caller turns it into what that revision asks for (an
// input_required result), never a request on the client's stream.
func (c *Client) Stateless(version string, caps []byte) {
	var declared capability
	if c.m.mode != modeModern { // a Modern Mux routes no server request to anyone
		declared = parseCapabilities(append(append([]byte(`{"capabilities":`), caps...), '}'))
	}
	c.m.mu.Lock()
	c.version = version
	c.caps = declared
	c.m.mu.Unlock()
}

// Resumed makes c the client of a session initialized elsewhere (on
// another replica of the gateway), whose upstream carries on with it: its
// negotiated version is version, and nothing initializes it again (c has
// no initialize to replay, nor a notifications/initialized to send). Only
// for an exclusive Mux, before c's first message.
func (c *Client) Resumed(version string) {
	c.m.mu.Lock()
	c.version = version
	c.m.mu.Unlock()
}

// ServerInit returns the upstream's initialize result (shared mode), once
// the server is ready: what a stateless client's server/discover is built
// from; on a Modern Mux, the server's own server/discover result (see
// Passthrough). It fails as a request would while the server is not
// available.
func (c *Client) ServerInit(ctx context.Context) ([]byte, error) {
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if c.m.mode == modeModern {
		return c.m.discover, nil // ready: a probe succeeded
	}
	if c.m.initResult == nil {
		return nil, errors.New("mcpgate: the server's initialize result is not known")
	}
	return c.m.initResult, nil
}

// Version returns the protocol version negotiated by the client's initialize.
func (c *Client) Version() string {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return c.version
}

// Handle routes one message from the client. A request is answered exactly
// once on out (out is unused for notifications and responses). Handle may
// block while the upstream is starting, bounded by ctx and the request
// timeout.
func (c *Client) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	switch msg.Kind {
	case jsonrpc.KindRequest:
		c.request(ctx, msg, out)
	case jsonrpc.KindNotification:
		c.notification(msg)
	case jsonrpc.KindResponse:
		c.response(msg)
	}
}

// request routes a client request as the Mux's mode (mode.go) does.
func (c *Client) request(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	switch c.m.mode {
	case modeModern:
		c.modernRequest(ctx, msg, out) // modern.go
	case modeExclusive:
		c.exclusiveRequest(ctx, msg, out)
	default:
		c.sharedRequest(ctx, msg, out)
	}
}

// exclusiveRequest routes a request of the one session of an exclusive
// Mux: all but ping go to its process, its initialize kept for replay.
func (c *Client) exclusiveRequest(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	switch {
	case msg.MethodIs("ping"):
		out.Reply(jsonrpc.Response(msg.Bytes(msg.ID), []byte(`{}`)))
	case msg.MethodIs(protocol.MethodInitialize):
		// Its answer does not count as Served: a process that
		// initializes and then crashes must keep backing off.
		c.forwardCall(ctx, msg, out, c.recordInit(msg), false)
	default:
		c.ensureInitialized()
		c.forward(ctx, msg, out, nil)
	}
}

// sharedRequest routes a request of a session of a shared Mux: what
// carries per-session state on a process all share (initialize, the
// logging level, subscriptions, tasks) is answered or merged here.
func (c *Client) sharedRequest(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	switch {
	case msg.MethodIs("ping"):
		out.Reply(jsonrpc.Response(msg.Bytes(msg.ID), []byte(`{}`)))
	case msg.MethodIs(protocol.MethodInitialize):
		c.initialize(ctx, msg, out)
	case msg.MethodIs(protocol.MethodLoggingSetLevel):
		c.setLevel(ctx, msg, out)
	case msg.MethodIs(protocol.MethodResourcesSubscribe):
		c.subscribe(ctx, msg, out, true)
	case msg.MethodIs(protocol.MethodResourcesUnsubscribe):
		c.subscribe(ctx, msg, out, false)
	case msg.MethodIs(protocol.MethodTasksGet), msg.MethodIs(protocol.MethodTasksResult), msg.MethodIs(protocol.MethodTasksCancel):
		c.taskRequest(ctx, msg, out) // tasks.go: only the client's own
	case msg.MethodIs(protocol.MethodTasksList):
		c.forward(ctx, msg, taskListStream{out, c}, nil)
	case taskAugmented(msg):
		c.createTask(ctx, msg, out)
	default:
		c.forward(ctx, msg, out, nil)
	}
}

// forward registers the request and writes it upstream with its id (and
// progress token) rewritten. onReply, if set, sees the upstream reply first;
// it is also told, with an error reply, when the call ends any other way
// (refused here, failed, cancelled, abandoned), so that it can undo.
func (c *Client) forward(ctx context.Context, msg *jsonrpc.Message, out conn.Stream, onReply func(*jsonrpc.Message)) {
	c.forwardCall(ctx, msg, out, onReply, true)
}

// forwardCall is forward; served says whether the server's answer counts
// as the process having served a client (the Upstream's Served).
func (c *Client) forwardCall(ctx context.Context, msg *jsonrpc.Message, out conn.Stream, onReply func(*jsonrpc.Message), served bool) {
	m := c.m
	id := msg.Bytes(msg.ID)
	cl := &call{client: c, out: out, onReply: onReply, noServe: !served}
	cl.setID(id)
	if msg.ProgressToken.Present() {
		cl.setToken(msg.Bytes(msg.ProgressToken))
	}
	j := job{msg: msg.Raw, id: msg.ID, token: msg.ProgressToken}
	for {
		if err := c.waitReady(ctx); err != nil {
			out.Reply(errorReply(id, protocol.CodeServerError, err))
			endHook(onReply, protocol.CodeServerError, err.Error())
			return
		}
		m.mu.Lock()
		// The process may have exited (or a new one not yet been
		// initialized) since waitReady looked: never write to one that is
		// not ready.
		if m.closed || m.readyLocked() {
			break
		}
		m.mu.Unlock()
	}
	if c.closed || m.closed {
		err := c.closedErrLocked()
		m.mu.Unlock()
		refuse(out, id, onReply, protocol.CodeServerError, err.Error())
		return
	}
	if c.lookupLocked(cl.id) != nil {
		m.mu.Unlock()
		refuse(out, id, onReply, protocol.CodeInvalidRequest, "mcpgate: a request with this id is already in flight")
		return
	}
	full := m.opts.MaxInFlight > 0 && m.sending >= m.opts.MaxInFlight
	if full && len(c.queue) >= maxQueuedPerClient {
		m.mu.Unlock()
		m.stats.queueFull.Add(1)
		refuse(out, id, onReply, protocol.CodeServerError, "mcpgate: too many requests waiting for this server; retry later")
		return
	}
	m.registerLocked(cl)
	j.upID, j.deadline = cl.upID, cl.deadline
	c.addLocked(cl)
	if full {
		cl.queued = true
		j.msg = bytes.Clone(msg.Raw) // the caller's buffer is not ours past return
		cl.job = j
		if len(c.queue) == 0 {
			m.waiting = append(m.waiting, c)
		}
		c.queue = append(c.queue, cl)
		m.mu.Unlock()
		return
	}
	cl.sent = true
	m.sending++
	m.wroteLocked(c)
	m.mu.Unlock()
	// From here on cl may already be answered (timed out, cancelled) by
	// another goroutine: only j is ours.
	m.writeJob(ctx, j)
}

// refuse answers a request that was never registered with an error, and
// tells its hook.
func refuse(out conn.Stream, id []byte, onReply func(*jsonrpc.Message), code int, text string) {
	out.Reply(jsonrpc.ErrorResponse(id, code, text))
	endHook(onReply, code, text)
}

// endHook tells a call's onReply hook, with an error reply, that the call
// ended without the server's answer, so a hook undoing state on failure
// (subscribe) runs on every path. Slow path only.
func endHook(onReply func(*jsonrpc.Message), code int, text string) {
	if onReply == nil {
		return
	}
	msg, _ := jsonrpc.Parse(jsonrpc.ErrorResponse([]byte("0"), code, text))
	onReply(&msg)
}

func (c *Client) notification(msg *jsonrpc.Message) {
	m := c.m
	switch {
	case m.mode == modeModern && removedNotification(msg):
		return // of the session eras: a modern server must not see it
	case msg.MethodIs(protocol.NotificationInitialized) && m.mode != modeExclusive:
		return // the gateway initialized the server itself
	case msg.MethodIs(protocol.NotificationInitialized):
		written := c.markInitialized()
		if written == nil {
			return // sent already, before an earlier request
		}
		m.trySend(msg.Raw, msg.MethodName())
		c.initSent(written)
		return
	case msg.MethodIs(protocol.NotificationCancelled):
		c.cancel(msg)
		return
	}
	m.trySend(msg.Raw, msg.MethodName())
}

// cancel maps a client's cancellation onto the upstream id.
func (c *Client) cancel(msg *jsonrpc.Message) {
	if !msg.CancelRequestID.Present() {
		return
	}
	m := c.m
	m.mu.Lock()
	cl := c.lookupLocked(msg.Bytes(msg.CancelRequestID))
	if cl == nil || m.pending[cl.upID] != cl {
		m.mu.Unlock()
		return
	}
	delete(m.pending, cl.upID)
	sent := cl.sent
	m.forgetLocked(cl)
	next := m.dequeueLocked()
	m.mu.Unlock()
	cl.out.Reply(nil)
	endHook(cl.onReply, protocol.CodeServerError, "cancelled by the client")
	if sent {
		out := jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.CancelRequestID, Value: appendUint(nil, cl.upID)})
		m.trySend(out, protocol.NotificationCancelled)
	}
	m.write(next)
}

// response carries a client's answer to a server->client request back.
func (c *Client) response(msg *jsonrpc.Message) {
	m := c.m
	gid, ok := parseUint(msg.Bytes(msg.ID))
	if !ok {
		return
	}
	m.mu.Lock()
	sr := m.serverReqs[gid]
	if sr == nil || sr.client != c {
		m.mu.Unlock()
		m.log.Debug("client answered an unknown server request", "id", string(msg.Bytes(msg.ID)))
		return
	}
	delete(m.serverReqs, gid)
	stale := sr.gen != m.gen
	m.mu.Unlock()
	if stale {
		return // the process that asked is gone
	}
	out := jsonrpc.Splice(nil, msg.Raw, jsonrpc.Edit{Span: msg.ID, Value: sr.upID})
	m.trySendGen(sr.gen, out, "response to a server request")
}
