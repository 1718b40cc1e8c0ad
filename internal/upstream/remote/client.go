package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// Errors returned by Client.
var (
	// ErrClosed is returned by Send after Close.
	ErrClosed = errors.New("remote: closed")
	// ErrNotConnected is returned by Send while a dropped legacy SSE stream
	// is being reconnected: the generation the message was meant for is
	// gone (Handler.Exited said so) and the next has not started.
	ErrNotConnected = errors.New("remote: not connected")
	// ErrDisconnected is wrapped by the error passed to Handler.Exited when
	// a legacy SSE stream ended or could not be opened.
	ErrDisconnected = errors.New("remote: event stream lost")
	// ErrUnreachable matches (errors.Is) the error of a request that could
	// not connect to the server at all (refused, no such host, dial
	// timeout). The error reply synthesized for such a request reads, for
	// example, "mcpgate: remote http://127.0.0.1:1/mcp unreachable:
	// connection refused".
	ErrUnreachable = errors.New("remote: server unreachable")
)

// OversizedPrefixLen is how much of an oversized message Handler.Oversized
// sees (at most).
const OversizedPrefixLen = 4 << 10

// Handler receives what a Client reads: the contract of upstream.Handler,
// with these specifics. Its methods are called one at a time, from
// whichever Client goroutine read the message. Started(1) comes from
// Start; Started(gen+1) after a legacy SSE stream was lost and a new one
// (a new upstream session) got its endpoint. Line gets each JSON-RPC
// message. Oversized gets a message over MaxMessageBytes: prefix is up to
// OversizedPrefixLen bytes (for an SSE event, the raw event text as far as
// it could be captured); if it came on a POST's response the Client also
// delivers an error response for that request, and on a legacy SSE stream
// the stream is lost (Exited). Exited's err is nil after Close, and wraps
// ErrDisconnected when a legacy SSE stream was lost. A method may call
// Send.
type Handler = upstream.Handler

// mode is the transport in use.
type mode uint8

const (
	modeUndecided mode = iota // auto, before the probe answered
	modeHTTP
	modeSSE
)

// Client is a connection to one remote MCP server. It is safe for
// concurrent use; see the package comment for its goroutines and locks.
type Client struct {
	// Static after Start.
	cfg    Config // defaults applied
	h      Handler
	log    *slog.Logger
	hc     *http.Client
	ownHC  bool     // hc is ours: its idle connections are closed by Close
	base   *url.URL // cfg.URL parsed
	ctx    context.Context
	cancel context.CancelFunc // called by Close: ends every request
	wg     sync.WaitGroup     // every goroutine the Client started

	deliverMu sync.Mutex // held while a Handler method runs
	reinitMu  sync.Mutex // one session renewal at a time
	// announceMu orders the calls of Config.OnSession; announced, guarded
	// by it, is the session the last one told (resume.go).
	announceMu sync.Mutex
	announced  announced
	closeOnce  sync.Once

	mu sync.Mutex
	// guarded by mu:
	closed  bool
	mode    mode
	gen     uint64 // current generation
	started bool   // Started(gen) was called and Exited(gen) not yet
	last    <-chan struct{}
	// endSession: Close sends DELETE for the session even with
	// KeepSession (EndSessionOnClose).
	endSession bool
	// inflight maps the raw id of each request awaiting its reply to the
	// cancel func of its exchange (notifications/cancelled for it, sent
	// through Send, aborts the exchange at once).
	inflight map[string]context.CancelFunc
	initID   []byte      // raw id of the latest initialize sent
	init     []byte      // params of the latest initialize sent
	sess     session     // Streamable HTTP session
	lc       *legacyConn // legacy SSE connection; nil until the reader starts
	// onDemand: the standalone stream is opened only while held (a
	// resumed session's; standalone.go), held says whether it is.
	onDemand, held bool
}

// Start validates cfg and returns a Client; it calls h.Started(1) before
// returning. It does not touch the network, the first Send does (or
// HoldStream, for a session it resumes).
func Start(cfg Config, h Handler) (*Client, error) {
	if h == nil {
		return nil, errors.New("remote: nil Handler")
	}
	base, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg: cfg, h: h, base: base, hc: cfg.HTTPClient,
		log:      cfg.Logger.With("server", cfg.Name),
		gen:      1,
		started:  true,
		inflight: map[string]context.CancelFunc{},
	}
	if c.hc == nil {
		c.hc, c.ownHC = defaultHTTPClient(cfg.ConnectTimeout), true
	}
	switch cfg.Transport {
	case TransportHTTP:
		c.mode = modeHTTP
	case TransportSSE:
		c.mode = modeSSE
	}
	closed := make(chan struct{})
	close(closed)
	c.last = closed
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.h.Started(1)
	if cfg.Resume != nil {
		c.resumeSession()
	}
	return c, nil
}

// outgoing is one message given to Send.
type outgoing struct {
	body   []byte
	kind   jsonrpc.Kind
	id     []byte // raw id of a request; nil otherwise
	method string
	gen    uint64
	// ctx bounds the exchange: a child of the Client's, cancelled when
	// the exchange ends, by Close, or by notifications/cancelled for id.
	ctx    context.Context
	cancel context.CancelFunc
	probe  bool            // auto: this initialize decides the transport; set by run
	prev   <-chan struct{} // closed when the previous message may be overtaken
	next   chan struct{}   // closed (via release) when the next message may start
	once   sync.Once
}

// release lets the next message go. Safe to call more than once.
func (o *outgoing) release() { o.once.Do(func() { close(o.next) }) }

// Send sends one JSON-RPC message to the server. It copies msg and returns
// without waiting for the server: a goroutine owned by the Client POSTs it
// and delivers what comes back to the Handler. A request that cannot be
// delivered (an HTTP error, a stream that ends before the reply and cannot
// be resumed) gets a JSON-RPC error response for its id through
// Handler.Line, so its sender is never left waiting. Send returns an error
// wrapping jsonrpc.ErrParse or jsonrpc.ErrInvalidRequest for a message that
// is not one JSON-RPC message, ErrClosed after Close, and ErrNotConnected
// while a lost legacy SSE stream is being replaced. ctx is not used beyond
// the call: the exchange runs until it ends or Close. Send never blocks on
// the network. Safe for concurrent use.
//
// notifications/cancelled for a request still awaiting its reply aborts
// that request's exchange at once (its HTTP request or stream is closed)
// besides being sent; no error reply is synthesized for the cancelled
// request, as its sender gave up on it.
func (c *Client) Send(ctx context.Context, msg []byte) error {
	return c.send(ctx, 0, msg)
}

// SendGen is Send restricted to generation gen: it returns ErrNotConnected
// unless gen is the current generation and it has started. The
// multiplexer uses it for messages that belong to one upstream session
// (answers to its server requests), which must not reach the session of a
// reconnected legacy SSE stream. Never blocks; safe for concurrent use.
func (c *Client) SendGen(ctx context.Context, gen uint64, msg []byte) error {
	if gen == 0 {
		return ErrNotConnected
	}
	return c.send(ctx, gen, msg)
}

// TrySendGen is SendGen without a context; it never blocks either.
func (c *Client) TrySendGen(gen uint64, msg []byte) error {
	return c.SendGen(context.Background(), gen, msg)
}

// send is Send to generation gen, or to the current one when gen is 0.
func (c *Client) send(ctx context.Context, gen uint64, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m, err := jsonrpc.Parse(msg)
	if err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	o := &outgoing{body: bytes.Clone(msg), kind: m.Kind, next: make(chan struct{})}
	o.method = strings.Clone(m.MethodName())
	var params, cancelled []byte
	switch {
	case m.Kind == jsonrpc.KindRequest:
		o.id = o.body[m.ID.Start:m.ID.End]
		if o.method == protocol.MethodInitialize {
			params = paramsOf(o.body)
		}
	case m.Kind == jsonrpc.KindNotification && o.method == protocol.NotificationCancelled:
		if s := m.CancelRequestID; s.Present() {
			cancelled = o.body[s.Start:s.End]
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case !c.started, gen != 0 && gen != c.gen:
		return ErrNotConnected
	}
	if params != nil {
		c.init, c.initID = params, o.id
	}
	if abort, ok := c.inflight[string(cancelled)]; ok && cancelled != nil {
		delete(c.inflight, string(cancelled))
		abort()
	}
	o.ctx, o.cancel = context.WithCancel(c.ctx)
	if o.id != nil {
		c.inflight[string(o.id)] = o.cancel
	}
	o.gen, o.prev, c.last = c.gen, c.last, o.next
	c.wg.Add(1)
	go c.run(o)
	return nil
}

// EndSessionOnClose makes Close end the upstream session at the server
// (DELETE) even with Config.KeepSession: its client deleted it.
func (c *Client) EndSessionOnClose() {
	c.mu.Lock()
	c.endSession = true
	c.mu.Unlock()
}

// Delivered returns a channel closed once every message sent so far has
// been delivered: a notification answered by the server, a request
// written. A replica of a cluster waits on it before it tells a client
// its notification was accepted, so that a request the client sends next,
// through another replica, cannot reach the server first.
func (c *Client) Delivered() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// TrySend is Send without a context: Send never blocks (the exchange runs
// on a goroutine of the Client), so TrySend never blocks either. It exists
// for owners that need a send that cannot block, such as the multiplexer's
// timer and teardown paths. Safe for concurrent use.
func (c *Client) TrySend(msg []byte) error {
	return c.Send(context.Background(), msg)
}

// Restart does nothing: a remote session has no process to replace, and a
// new session would lose what the client negotiated in the one it has.
// CanRestart says so, and the multiplexer retries a failed initialize on
// the same session instead.
func (c *Client) Restart(gen uint64, reason string) {}

// CanRestart reports false: see Restart.
func (c *Client) CanRestart() bool { return false }

// Served does nothing: the Client keeps no restart backoff to reset.
func (c *Client) Served(gen uint64) {}

// PID returns 0: a remote server is no local process.
func (c *Client) PID() int { return 0 }

// run carries one message to the server in whichever transport is in use.
// Messages start in the order they were sent (each waits for the previous
// one's release), so the transport is known by the time a message starts,
// except before the first initialize of an auto Client got an answer: an
// initialize then probes (and decides the transport), anything else is
// POSTed as Streamable HTTP without deciding it, so that it still gets an
// answer (an error from a legacy or unreachable server).
func (c *Client) run(o *outgoing) {
	defer c.wg.Done()
	defer o.cancel()
	defer o.release()
	select {
	case <-o.prev:
	case <-o.ctx.Done():
		return
	}
	c.mu.Lock()
	m := c.mode
	o.probe = m == modeUndecided && o.method == protocol.MethodInitialize
	c.mu.Unlock()
	if m == modeSSE {
		c.postLegacy(o)
		return
	}
	if c.postHTTP(o, true) == fallBack {
		c.decide(modeSSE)
		c.log.Info("server does not speak Streamable HTTP; using legacy SSE", "url", redact(c.base))
		c.postLegacy(o)
	}
}

// decide records the outcome of the probing initialize in auto mode.
func (c *Client) decide(m mode) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mode == modeUndecided {
		c.mode = m
	}
}

// Close ends the connection: it aborts every exchange in flight, sends
// DELETE for a Streamable HTTP session (bounded by ConnectTimeout), waits
// for every goroutine the Client started, and calls Handler.Exited for the
// current generation. Idempotent; must not be called from a Handler method.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		sess := c.sess
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
		c.mu.Lock()
		end := c.endSession
		c.mu.Unlock()
		if sess.id != "" && (!c.cfg.KeepSession || end) {
			c.deleteSession(sess)
		}
		if c.ownHC {
			c.hc.CloseIdleConnections()
		}
		c.mu.Lock()
		gen, started := c.gen, c.started
		c.started = false
		c.mu.Unlock()
		if started {
			c.deliverMu.Lock()
			c.h.Exited(gen, nil)
			c.deliverMu.Unlock()
		}
	})
	return nil
}

// deliver hands one message from the server to the Handler. A response
// settles its request, so that no error is synthesized for it afterwards;
// the reply to the latest initialize also gives the protocol version.
func (c *Client) deliver(gen uint64, data []byte) {
	if jsonrpc.IsBatch(data) {
		if elems, err := jsonrpc.SplitBatch(data); err == nil {
			for _, e := range elems {
				c.deliver(gen, e)
			}
			return
		}
	}
	if m, err := jsonrpc.Parse(data); err == nil && m.Kind == jsonrpc.KindResponse {
		id := m.Bytes(m.ID)
		c.mu.Lock()
		delete(c.inflight, string(id))
		isInit := c.initID != nil && bytes.Equal(id, c.initID)
		c.mu.Unlock()
		if isInit && !m.IsError {
			c.setVersion(versionOf(data))
			c.announce() // before the answer: the owner hands the session on
		}
	}
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.h.Line(gen, data)
}

// oversized reports a message over the limit.
func (c *Client) oversized(gen uint64, prefix []byte, size int) {
	c.log.Warn("message from server exceeds the size limit; dropped", "bytes", size, "limit", c.cfg.MaxMessageBytes)
	if len(prefix) > OversizedPrefixLen {
		prefix = prefix[:OversizedPrefixLen]
	}
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.h.Oversized(gen, prefix, size)
}

// fail delivers an error response for request id unless its reply was
// delivered already.
func (c *Client) fail(gen uint64, id []byte, code int, text string) {
	if id == nil {
		return
	}
	c.mu.Lock()
	_, pending := c.inflight[string(id)]
	delete(c.inflight, string(id))
	c.mu.Unlock()
	if !pending {
		return
	}
	c.log.Warn("request failed", "err", text)
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.h.Line(gen, jsonrpc.ErrorResponse(id, code, text))
}

// awaiting reports whether request id still awaits its reply.
func (c *Client) awaiting(id []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.inflight[string(id)]
	return ok
}

// paramsOf returns a copy of the params member of a message, or {}.
func paramsOf(raw []byte) []byte {
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(raw, &m) != nil || len(m.Params) == 0 {
		return []byte("{}")
	}
	return bytes.Clone(m.Params)
}

// versionOf returns result.protocolVersion of an initialize response.
func versionOf(raw []byte) string {
	var m struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	_ = json.Unmarshal(raw, &m)
	return m.Result.ProtocolVersion
}

// redact returns u without user info, query or fragment, for logs.
func redact(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// Interface guard: the multiplexer takes a Client as its upstream.
var _ upstream.Upstream = (*Client)(nil)
