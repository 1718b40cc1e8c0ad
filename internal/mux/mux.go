package mux

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// Stream receives the messages routed to one client stream: the stream of
// the client request that caused them, or the session's standalone stream.
// Methods must not block; they take ownership of msg, which the mux never
// modifies afterwards (the same slice may be given to several streams).
type Stream interface {
	// Send delivers a message that is not the final reply to a request.
	Send(msg []byte)
	// Reply delivers the final reply to a request. A nil msg ends the request
	// without a message: the client cancelled it.
	Reply(msg []byte)
}

// Upstream is the connection to one MCP server as the mux needs it. Its
// owner feeds what it reads to the Mux's handler methods.
type Upstream interface {
	// Send writes one message; safe for concurrent use; must not retain msg.
	Send(ctx context.Context, msg []byte) error
}

// Options configure a Mux. Zero values take the documented defaults.
type Options struct {
	Name        string        // server name, for logs and errors
	Exclusive   bool          // one client per upstream (session isolation)
	Timeout     time.Duration // per request; default 5m
	MaxInFlight int           // requests written upstream at once; 0: unlimited
	// Roots is the result of roots/list answered when no client session can
	// be attributed: a JSON object like {"roots":[...]}. Default {"roots":[]}.
	Roots   []byte
	Version string // gateway version, sent as clientInfo.version
	Logger  *slog.Logger
}

// Stats are counters since the Mux started.
type Stats struct {
	Forwarded       uint64 // client requests written upstream
	TimedOut        uint64 // client requests answered with a timeout
	Garbage         uint64 // upstream lines that are not JSON-RPC
	UnknownReplies  uint64 // upstream replies matching no pending request
	Unroutable      uint64 // server->client requests refused: no single session to route to
	OversizedLines  uint64 // upstream lines over the line limit
	DroppedProgress uint64 // progress for requests no longer pending
}

// readyWait bounds how long a request waits for the upstream to be (re)started
// and initialized before it fails.
const readyWait = 30 * time.Second

var (
	errClosed   = errors.New("mcpgate: gateway is shutting down")
	errExited   = errors.New("mcpgate: upstream server exited")
	errNotReady = errors.New("mcpgate: upstream server is not running")
)

// Mux multiplexes client sessions onto one upstream. See the package comment.
type Mux struct {
	// Static after construction.
	opts Options
	log  *slog.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines started by the Mux

	upMu sync.Mutex
	up   Upstream // set once by SetUpstream; guarded by upMu
	upCh chan struct{}

	stats struct {
		forwarded, timedOut, garbage, unknown, unroutable, oversized, droppedProgress atomic.Uint64
	}

	mu sync.Mutex
	// guarded by mu:
	closed     bool
	nextID     uint64
	pending    map[uint64]*call      // upstream id -> in-flight call (client and internal)
	serverReqs map[uint64]*serverReq // gateway id -> server->client request
	clients    map[*Client]struct{}
	gen        uint64        // current process generation
	running    bool          // gen is running
	readyGen   uint64        // generation that finished initialization
	ready      chan struct{} // closed when readyGen == gen
	initErr    error         // why the current generation failed to initialize
	initResult []byte        // shared mode: upstream initialize result
	upVersion  string        // shared mode: protocol version the upstream agreed
	sending    int           // client calls written upstream and not finished
	waiting    []*Client     // clients with queued calls, round-robin order
	subs       map[string]int
	level      int // level last sent upstream; -1 none
}

// call is one request in flight upstream.
type call struct {
	upID     uint64
	client   *Client // nil for the gateway's own requests
	clientID []byte  // the client's raw id
	token    []byte  // the client's raw progress token, or nil
	out      Stream
	msg      []byte // client message, kept only while queued
	edits    [2]jsonrpc.Edit
	nedits   int
	gen      uint64
	queued   bool
	sent     bool
	timer    *time.Timer
	onReply  func(msg *jsonrpc.Message) // internal hook, called without the lock
}

// serverReq is a request from the server waiting for a client's answer.
type serverReq struct {
	upID   []byte // the server's raw id
	client *Client
	gen    uint64
}

// New returns a Mux; call SetUpstream before the upstream starts delivering.
func New(opts Options) *Mux {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.Roots == nil {
		opts.Roots = []byte(`{"roots":[]}`)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Mux{
		opts: opts, log: opts.Logger.With("server", opts.Name),
		ctx: ctx, cancel: cancel, upCh: make(chan struct{}),
		nextID: 1, pending: map[uint64]*call{}, serverReqs: map[uint64]*serverReq{},
		clients: map[*Client]struct{}{}, ready: make(chan struct{}), subs: map[string]int{}, level: -1,
	}
}

// SetUpstream sets the connection the Mux writes to. Call it once.
func (m *Mux) SetUpstream(up Upstream) {
	m.upMu.Lock()
	defer m.upMu.Unlock()
	if m.up == nil {
		m.up = up
		close(m.upCh)
	}
}

func (m *Mux) upstream() Upstream {
	select {
	case <-m.upCh:
	case <-m.ctx.Done():
		return nil
	}
	m.upMu.Lock()
	defer m.upMu.Unlock()
	return m.up
}

// send writes msg upstream; failures are logged by the caller's path.
func (m *Mux) send(msg []byte) error {
	up := m.upstream()
	if up == nil {
		return errClosed
	}
	return up.Send(m.ctx, msg)
}

// Stats returns the Mux's counters.
func (m *Mux) Stats() Stats {
	return Stats{
		Forwarded: m.stats.forwarded.Load(), TimedOut: m.stats.timedOut.Load(),
		Garbage: m.stats.garbage.Load(), UnknownReplies: m.stats.unknown.Load(),
		Unroutable: m.stats.unroutable.Load(), OversizedLines: m.stats.oversized.Load(),
		DroppedProgress: m.stats.droppedProgress.Load(),
	}
}

// Pending returns the number of requests in flight upstream (for tests and status).
func (m *Mux) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// Close fails every pending request, stops timers and waits for the Mux's
// goroutines. The owner stops the upstream.
func (m *Mux) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	calls := m.takeAllLocked()
	m.mu.Unlock()
	m.cancel()
	m.failCalls(calls, errClosed)
	m.wg.Wait()
}

// takeAllLocked removes every pending call.
func (m *Mux) takeAllLocked() []*call {
	calls := make([]*call, 0, len(m.pending))
	for id, c := range m.pending {
		delete(m.pending, id)
		m.forgetLocked(c)
		calls = append(calls, c)
	}
	m.serverReqs = map[uint64]*serverReq{}
	return calls
}

// forgetLocked undoes the bookkeeping of a call leaving the pending table.
func (m *Mux) forgetLocked(c *call) {
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.client != nil {
		c.client.removeLocked(c)
		if c.sent {
			m.sending--
		}
	}
}

// failCalls answers each call with an error, outside the lock.
func (m *Mux) failCalls(calls []*call, err error) {
	for _, c := range calls {
		m.fail(c, jsonrpc.CodeServerError, err.Error())
	}
}

func (m *Mux) fail(c *call, code int, text string) {
	if c.onReply != nil {
		msg, _ := jsonrpc.Parse(jsonrpc.ErrorResponse(appendUint(nil, c.upID), code, text))
		c.onReply(&msg)
	}
	if c.out != nil {
		c.out.Reply(jsonrpc.ErrorResponse(c.clientID, code, text))
	}
}

// register adds c to the pending table under a new upstream id and arms its
// timeout. Called with mu held.
func (m *Mux) registerLocked(c *call) {
	c.upID = m.nextID
	m.nextID++
	c.gen = m.gen
	m.pending[c.upID] = c
	id := c.upID
	c.timer = time.AfterFunc(m.opts.Timeout, func() { m.timeout(id) })
}

// timeout answers a request that took too long and cancels it upstream.
func (m *Mux) timeout(id uint64) {
	m.mu.Lock()
	c := m.pending[id]
	if c == nil {
		m.mu.Unlock()
		return
	}
	delete(m.pending, id)
	sent := c.sent
	m.forgetLocked(c)
	next := m.dequeueLocked()
	m.mu.Unlock()
	m.stats.timedOut.Add(1)
	m.log.Warn("request timed out", "upstream_id", id, "timeout", m.opts.Timeout)
	m.fail(c, jsonrpc.CodeRequestTimeout, "request timed out")
	if sent {
		m.cancelUpstream(id, "request timed out")
	}
	m.write(next)
}

// cancelUpstream tells the server to stop working on request id.
func (m *Mux) cancelUpstream(id uint64, reason string) {
	params := append([]byte(`{"requestId":`), appendUint(nil, id)...)
	params = append(params, `,"reason":`...)
	params = strconv.AppendQuote(params, reason)
	params = append(params, '}')
	if err := m.send(jsonrpc.Notification("notifications/cancelled", params)); err != nil {
		m.log.Debug("cancel not sent", "upstream_id", id, "err", err)
	}
}

// write sends calls that were registered (and possibly dequeued) upstream.
func (m *Mux) write(calls []*call) {
	for _, c := range calls {
		msg := jsonrpc.Splice(nil, c.msg, c.edits[:c.nedits]...)
		c.msg = nil
		m.stats.forwarded.Add(1)
		if err := m.send(msg); err != nil {
			m.finish(c.upID, func(c *call) {
				m.fail(c, jsonrpc.CodeServerError, "mcpgate: writing to upstream server: "+err.Error())
			})
		}
	}
}

// finish removes call id if still pending and runs f on it outside the lock.
func (m *Mux) finish(id uint64, f func(*call)) bool {
	m.mu.Lock()
	c := m.pending[id]
	if c == nil {
		m.mu.Unlock()
		return false
	}
	delete(m.pending, id)
	m.forgetLocked(c)
	next := m.dequeueLocked()
	m.mu.Unlock()
	f(c)
	m.write(next)
	return true
}

// appendUint appends n as a JSON number.
func appendUint(dst []byte, n uint64) []byte { return strconv.AppendUint(dst, n, 10) }

// parseUint parses a JSON number made only of decimal digits (our own ids).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
