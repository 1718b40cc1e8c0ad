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
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// Options configure a Mux. Zero values take the documented defaults.
type Options struct {
	Name      string        // server name, for logs and errors
	Exclusive bool          // one client per upstream (session isolation)
	Timeout   time.Duration // per request; default 5m
	// InitTimeout bounds the gateway's own initialize of each process
	// generation (a first `npx -y` may download for a while), independent
	// of Timeout; default 120s. A failed initialize is retried (see State).
	InitTimeout time.Duration
	// PingInterval, when positive, sends the gateway's own ping every
	// interval while the server is Ready; no answer within
	// min(PingInterval, 30s), or an error answer other than -32601 (method
	// not found), restarts the process through the Upstream's Restart (an
	// upstream that cannot restart is probed on).
	// 0 (the default) turns the probe off: some servers do not answer ping.
	PingInterval time.Duration
	// MaxInFlight bounds the client requests written upstream at once; more
	// wait in per-session queues served round-robin. 0: unlimited.
	MaxInFlight int
	// Roots is the result of roots/list answered when no client session can
	// be attributed: a JSON object like {"roots":[...]}. Default {"roots":[]}.
	Roots   []byte
	Version string // gateway version, sent as clientInfo.version
	Logger  *slog.Logger

	// ClientCapabilities is the capabilities object (raw JSON) the
	// gateway's own initialize of a shared upstream declares. Default:
	// every client capability the gateway can route to some session
	// (sampling, elicitation in form and URL mode, roots). A process
	// serving only clients that declared less is initialized with what
	// they declared, so that a server checking the client's capabilities
	// sees the truth. Ignored in exclusive mode (the client's own
	// initialize is forwarded).
	ClientCapabilities []byte

	// Modern makes a Mux for a server that speaks protocol version
	// 2026-07-28 (stateless) itself, used by clients of that revision
	// only: it never initializes its upstream but probes each process
	// generation with server/discover, forwards requests untranslated,
	// serves the clients' subscriptions/listen from one listen of its own
	// and refuses server requests (see modern.go). Implies shared mode
	// (Exclusive is ignored). Default false.
	Modern bool
	// ProbeTimeout bounds a Modern Mux's server/discover probe of each
	// process generation (at most InitTimeout): no answer by then counts as
	// "not a 2026-07-28 server" (a session-era server may ignore
	// requests before initialize), and the probe is repeated after a backoff.
	// Default 5s.
	ProbeTimeout time.Duration
	// FirstID is the first id the Mux gives its requests upstream
	// (default 1); the ids that follow count up from it. An upstream
	// session that several replicas of the gateway write to (a portable
	// remote session) needs each replica's ids apart from the others':
	// an id is unique in a session, and a server that keys its replies'
	// streams by id sends one replica's reply to another's request.
	// At most MaxFirstID, so that ids stay exact in a JavaScript number.
	FirstID uint64
}

// MaxFirstID bounds Options.FirstID: ids from it stay below 2^53, the
// largest integer a JavaScript server reads exactly, for 2^52 requests.
const MaxFirstID = 1 << 52

// Stats are counters since the Mux started.
type Stats struct {
	Forwarded       uint64 // client requests written upstream
	TimedOut        uint64 // client requests answered with a timeout
	Garbage         uint64 // upstream lines that are not JSON-RPC
	UnknownReplies  uint64 // upstream replies matching no pending request
	Unroutable      uint64 // server->client requests refused: no single session to route to
	OversizedLines  uint64 // upstream lines over the line limit
	DroppedProgress uint64 // progress for requests no longer pending
	QueueFull       uint64 // client requests refused: their session's queue was full
	// DroppedSends counts best-effort messages (cancellations, ping
	// answers, refusals, answers to server requests, client notifications)
	// not written upstream because its queue was full or it was not running.
	DroppedSends uint64
	// DroppedNotifications counts server notifications (log messages
	// included) dropped in shared mode: no single session to deliver to.
	DroppedNotifications uint64
	// LivenessFailures counts liveness pings unanswered in time or refused.
	LivenessFailures uint64
	// ServerRequestsOverLimit counts server->client requests refused
	// because maxServerRequests (1024) already waited for a client's answer.
	ServerRequestsOverLimit uint64
	// TasksForgotten counts tasks a client of a shared Mux no longer owns
	// because it created more than maxTasksPerClient (1024) since (tasks.go).
	TasksForgotten uint64
}

// Plus returns the sum of s and o, field by field: the counters of
// several processes as one server's.
func (s Stats) Plus(o Stats) Stats {
	return Stats{
		Forwarded: s.Forwarded + o.Forwarded, TimedOut: s.TimedOut + o.TimedOut, Garbage: s.Garbage + o.Garbage,
		UnknownReplies: s.UnknownReplies + o.UnknownReplies, Unroutable: s.Unroutable + o.Unroutable,
		OversizedLines: s.OversizedLines + o.OversizedLines, DroppedProgress: s.DroppedProgress + o.DroppedProgress,
		QueueFull: s.QueueFull + o.QueueFull, DroppedSends: s.DroppedSends + o.DroppedSends,
		DroppedNotifications: s.DroppedNotifications + o.DroppedNotifications, LivenessFailures: s.LivenessFailures + o.LivenessFailures,
		ServerRequestsOverLimit: s.ServerRequestsOverLimit + o.ServerRequestsOverLimit, TasksForgotten: s.TasksForgotten + o.TasksForgotten,
	}
}

// maxQueuedPerClient bounds the requests one session may have waiting for
// an upstream slot (maxInFlight); more are refused with an error at once,
// so one client cannot hold unbounded memory in the queue.
const maxQueuedPerClient = 1024

// maxServerRequests bounds the server->client requests waiting for a
// client's answer (per Mux): a server flooding requests (sampling, say) at
// a session that does not answer must not grow the table without limit.
// More are refused with a JSON-RPC error at once and counted
// (Stats.ServerRequestsOverLimit).
const maxServerRequests = 1024

// defaultInitTimeout is Options.InitTimeout's default.
const defaultInitTimeout = 120 * time.Second

// maxPingWait bounds how long a liveness ping may go unanswered.
const maxPingWait = 30 * time.Second

// readyWait bounds how long a request waits for the upstream to be (re)started
// and initialized before it fails.
const readyWait = 30 * time.Second

// Errors. Only errClosed (and errSessionClosed, Client.CloseWith's) reach
// clients as they are; the others are causes, worded without the
// "mcpgate:" prefix that the client-visible error wrapping them carries
// once (see notAvailable).
var (
	errClosed = errors.New("mcpgate: the gateway is shutting down")
	errExited = errors.New("the server process exited")
)

// Mux multiplexes client sessions onto one upstream. See the package comment.
type Mux struct {
	// Static after construction.
	opts Options
	mode mode // which state machine runs (mode.go)
	log  *slog.Logger

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines started by the Mux

	upMu      sync.Mutex
	up        upstream.Upstream // written once by SetUpstream under upMu, before upCh closes; read after upCh
	servedGen atomic.Uint64     // last generation reported to up.Served
	// restarts is up.CanRestart(), asked once by SetUpstream; guarded by
	// mu, as the state transitions it decides are made under it.
	restarts bool

	// Rate limits of warnings a misbehaving server (or a hung one under many
	// clients' calls) can flood the log with.
	warnUnroutable, warnGarbage, warnUnknown, warnDropped, warnServerReqs, warnTimeout rateLimit

	// levelSem (capacity 1) serializes the level changes sent upstream;
	// a channel, not a mutex, so a client's setLevel waits for it only as
	// long as its own context allows. Taken before mu.
	levelSem chan struct{}
	upCh     chan struct{}

	stats struct {
		forwarded, timedOut, garbage, unknown, unroutable, oversized, droppedProgress, queueFull atomic.Uint64
		droppedSends, droppedNotes, livenessFailures, serverReqsOverLimit                        atomic.Uint64
		tasksForgotten                                                                           atomic.Uint64
	}

	mu sync.Mutex
	// guarded by mu:
	closed     bool
	nextID     uint64
	pending    map[uint64]*call      // upstream id -> in-flight call (client and internal)
	serverReqs map[uint64]*serverReq // gateway id -> server->client request
	clients    map[*Client]struct{}
	writers    map[*Client]struct{} // the clients of clients with calls written upstream (written > 0): attributeLocked's
	gen        uint64               // current process generation
	genStart   time.Time            // when gen started (Started): its startup time is logged once it is Ready
	running    bool                 // gen is running
	readyGen   uint64               // generation that finished initialization
	everReady  bool                 // some generation was ready: the first start is over
	ready      chan struct{}        // closed when readyGen == gen; else closed and replaced to wake waiters
	state      State
	initFails  int                             // failed initializes in a row (remote retry backoff)
	refused    error                           // the server's error answer to initialize since it was last ready (InitRefused)
	initResult []byte                          // shared mode: upstream initialize result
	upVersion  string                          // shared mode: protocol version the upstream agreed
	discover   []byte                          // Modern: the server/discover result of the latest probe that succeeded
	probeErr   error                           // Modern: why the latest probe failed (a *probeError); nil once one succeeds
	sending    int                             // client calls written upstream and not finished
	waiting    []*Client                       // clients with queued calls, round-robin order
	subs       map[string]map[*Client]struct{} // the clients subscribed to each URI (subscribeLocked)
	hub        listenHub                       // Modern: the clients' listens and the gateway's own (modern_listen.go)
	tasks      map[string]*task                // shared mode: task id -> who created it (tasks.go)
	taskTokens map[uint64]string               // shared mode: a task's upstream progress token -> its id
	level      int                             // level last sent upstream; -1 none; levelUnknown after a setLevel without answer
	leveled    int                             // clients of clients that asked for a level (level >= 0): wantLevelLocked walks them only when some did
	oldest     *call                           // deadline list, oldest first
	newest     *call
	expiryAt   time.Duration // the deadline (since epoch) expiry is set for; 0 when it is not set
	expiryArms uint64        // times expiry was set (tests)

	epoch  time.Time   // deadlines count from here (monotonic)
	expiry *time.Timer // fires at the oldest call's deadline; owned by expireLoop
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
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = defaultInitTimeout
	}
	if opts.Roots == nil {
		opts.Roots = []byte(`{"roots":[]}`)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Modern {
		opts.Exclusive = false
		if opts.ProbeTimeout <= 0 {
			opts.ProbeTimeout = defaultProbeTimeout
		}
		opts.ProbeTimeout = min(opts.ProbeTimeout, opts.InitTimeout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if opts.FirstID == 0 || opts.FirstID > MaxFirstID {
		opts.FirstID = 1
	}
	m := &Mux{
		opts: opts, mode: modeOf(opts), log: opts.Logger.With("server", opts.Name),
		ctx: ctx, cancel: cancel, upCh: make(chan struct{}), levelSem: make(chan struct{}, 1),
		nextID: opts.FirstID, pending: map[uint64]*call{}, serverReqs: map[uint64]*serverReq{},
		clients: map[*Client]struct{}{}, writers: map[*Client]struct{}{}, ready: make(chan struct{}), subs: map[string]map[*Client]struct{}{}, level: -1,
		hub:   listenHub{clients: map[*listener]struct{}{}},
		epoch: time.Now(), expiry: time.NewTimer(time.Hour),
	}
	m.state = State{Phase: Starting, Since: m.epoch}
	m.expiry.Stop()
	m.wg.Add(1)
	go m.expireLoop()
	return m
}

// SetUpstream sets the connection the Mux writes to. Call it once. The
// handler methods may be called before it (StartStdio delivers Waiting, and
// may deliver Started and Line, before it returns the Stdio to set): until
// then best-effort messages (answers to server pings, refusals) are dropped
// and counted (Stats.DroppedSends), and the gateway's initialize waits for
// it, bounded by Options.InitTimeout.
func (m *Mux) SetUpstream(up upstream.Upstream) {
	m.upMu.Lock()
	defer m.upMu.Unlock()
	if m.up == nil {
		m.up = up
		restarts := up.CanRestart()
		m.mu.Lock()
		m.restarts = restarts
		m.mu.Unlock()
		close(m.upCh)
	}
}

// upstream waits for SetUpstream, at most until ctx ends or the Mux closes
// (then nil).
func (m *Mux) upstream(ctx context.Context) upstream.Upstream {
	select {
	case <-m.upCh:
	case <-ctx.Done():
		return nil
	case <-m.ctx.Done():
		return nil
	}
	return m.up // see upstreamNow
}

// Stats returns the Mux's counters.
func (m *Mux) Stats() Stats {
	return Stats{
		Forwarded: m.stats.forwarded.Load(), TimedOut: m.stats.timedOut.Load(),
		Garbage: m.stats.garbage.Load(), UnknownReplies: m.stats.unknown.Load(),
		Unroutable: m.stats.unroutable.Load(), OversizedLines: m.stats.oversized.Load(),
		DroppedProgress: m.stats.droppedProgress.Load(), QueueFull: m.stats.queueFull.Load(),
		DroppedSends: m.stats.droppedSends.Load(), DroppedNotifications: m.stats.droppedNotes.Load(),
		LivenessFailures: m.stats.livenessFailures.Load(), ServerRequestsOverLimit: m.stats.serverReqsOverLimit.Load(),
		TasksForgotten: m.stats.tasksForgotten.Load(),
	}
}

// Pending returns the number of requests in flight (for tests and status):
// each client listen of a Modern Mux counts, the gateway's own listen
// serving them does not.
func (m *Mux) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.pending)
	for _, u := range []*upListen{m.hub.cur, m.hub.retiring} {
		if u != nil && m.ownLocked(u.call.upID) == u {
			n--
		}
	}
	return n
}

// Close fails every pending request, stops timers and waits for the Mux's
// goroutines; it never waits on the server (writes in progress end with
// the Mux's context). The owner stops the upstream.
func (m *Mux) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.setStateLocked(Failed, errClosed, time.Time{})
	m.wakeLocked()
	calls := m.takeAllLocked()
	m.mu.Unlock()
	m.cancel()
	m.failCalls(calls, errClosed)
	m.wg.Wait()
}

// spawn runs f on a goroutine Close waits for, unless the Mux is closed;
// it reports whether it did.
func (m *Mux) spawn(f func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1) // under mu: Close sets closed under mu before it waits
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
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
	m.hub.resetLocked()
	return calls
}

// failCalls answers each call with an error, outside the lock.
func (m *Mux) failCalls(calls []*call, err error) {
	m.failCallsCause(calls, err, err)
}

// failCallsCause is failCalls where the gateway's own round trips (onGone)
// get cause, and the clients' calls the client-visible err that wraps it:
// a round trip's error is wrapped again by its caller, and must not carry
// the prefix and the server name twice.
func (m *Mux) failCallsCause(calls []*call, err, cause error) {
	for _, c := range calls {
		if c.onGone != nil {
			c.onGone(cause)
			continue
		}
		m.fail(c, protocol.CodeServerError, err.Error())
	}
}

func (m *Mux) fail(c *call, code int, text string) {
	if c.onReply != nil {
		msg, _ := jsonrpc.Parse(jsonrpc.ErrorResponse(appendUint(nil, c.upID), code, text))
		c.onReply(&msg)
	}
	if c.out != nil {
		c.out.Reply(jsonrpc.ErrorResponse(c.id, code, text))
	}
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
