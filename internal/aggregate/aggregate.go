// Package aggregate serves one MCP endpoint merging several servers (an
// "endpoint" of the config): one client session of the endpoint is one
// session of each member server, and the endpoint's tools, prompts and
// resources are the members', renamed so that they cannot collide
// (SERVER__NAME by default), filtered, and routed back to their owner.
//
// The package sits between the HTTP front and the configured servers: an
// Endpoint is a conn.Backend built on the members' own Backends, so
// every isolation mode, remote and era of a member works behind it
// unchanged. It imports auth, conn, jsonrpc, mux and protocol only (never
// servers or the front); gateway builds it from the config.
//
// The session eras (conn.go and the files it uses): one client session is
// one session of each member. The naming, filters, cursors, views of the
// members' lists and their rendering (names.go, cursor.go, view.go) are
// functions of the options and of the members' lists, not of a session:
// the stateless revision (2026-07-28) serves the same endpoint, and the
// lists and merged views are kept once for every session (shared.go,
// viewcache.go).
//
// What a client sees, in short: tools and prompts named PREFIX+SEP+NAME
// (shortened past MaxNameLen with a stable hash), resources under their
// own URIs; merged lists whole in one page (members in config order), or
// in pages of Options.PageSize; members
// that are down hidden (list_changed when they leave and come back) and
// their tools answered at once with an error naming them and their state.
// Two members exposing the same name are a collision: the name is left out
// of the list, logged once naming both, and a call to it gets an error
// naming both; never routed to either at random.
//
// Members change in place (SetMembers, members.go: a config reload): the
// endpoint's sessions are kept, told with list_changed, and a call to a
// member removed is answered naming it.
package aggregate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
)

// Member is one server of an endpoint.
type Member struct {
	// Name is the server's name in the config.
	Name string
	// Backend opens the member's sessions (and, if it is also an
	// Backend.OpenStateless, its requests of the stateless revision).
	Backend conn.Backend
	// Prefix is put before the member's tool and prompt names, followed by
	// the endpoint's separator; "" puts nothing (the names must not
	// collide with another member's). Resources keep their URIs.
	Prefix string
	// Critical members must be ready for the endpoint to be ready; a
	// member that is not critical is hidden while it is down.
	Critical bool
	// Timeout bounds each request to the member (lists included): a
	// member that does not answer in time is left out of a merged list,
	// and a call to it fails naming it. 0: the member's own timeout.
	Timeout time.Duration
	// Policy, if set, decides which of the member's items (by their own
	// names) each principal may list and use, as at the member's own URL.
	Policy conn.Policy
	// Filter selects the member's tools, prompts and resources the
	// endpoint exposes (by their names before the prefix, and by URI).
	Filter Filter
	// State reports whether the member is ready and, if not, its state in
	// words ("starting", "backing off: exit status 1 ...; retrying in
	// 3s"); nil: always ready. Polled to hide and show the member.
	State func() (ready bool, state string)
	// FirstStart reports whether the member is on its first start: never
	// ready yet (a first npx -y download). A client's initialize waits
	// longer for it (Options.FirstStartWait). nil: never.
	FirstStart func() bool
	// SharedLists says that one upstream serves every session of the
	// member (a shared stdio server): its lists are the same for all, so
	// the endpoint fetches each once and shares it, fetching again on the
	// member's list_changed or restart. false (a session-isolated or
	// remote member, whose lists may differ per session): each session
	// fetches its own, kept once per distinct content.
	SharedLists bool
	// OpenStateless, if set, opens the member's session for one request
	// of the stateless revision declaring caps (raw JSON): a Conn of the
	// session eras on the processes that serve the member's stateless
	// requests (servers.StatelessSession). nil: Backend.Open.
	OpenStateless func(ctx context.Context, general conn.Stream, caps []byte) (conn.Conn, error)
}

// Filter is allow/deny globs (path.Match syntax) per kind. An empty allow
// list allows everything; deny wins over allow.
type Filter struct {
	Tools, Prompts, Resources Globs
}

// Globs is one kind's allow and deny patterns.
type Globs struct {
	Allow, Deny []string
}

// Options configure an Endpoint.
type Options struct {
	// Name is the endpoint's name (its URL is /endpoints/NAME/mcp).
	Name string
	// Separator goes between a member's prefix and a name. Default "__".
	Separator string
	// MaxNameLen is the longest exposed tool or prompt name; longer ones
	// are shortened deterministically (a stable hash suffix) and still
	// route back. Default 64, the limit many model APIs impose.
	MaxNameLen int
	// SnakeCase normalizes exposed names to snake_case, keeping an exact
	// reverse mapping (a collision is an error naming both).
	SnakeCase bool
	// Filter applies on top of each member's own.
	Filter Filter
	// Version is the gateway's version, for the endpoint's serverInfo.
	Version string
	// PollInterval is how often the members' State is read, to hide and
	// show them. Default 500ms.
	PollInterval time.Duration
	// StartWait is how long a client's initialize waits for a member that
	// is starting again after it was ready (a restart), and is not
	// critical: a member restarting must not hold up the others; it is
	// initialized for the session when it is ready, and the client told
	// with list_changed. Default 5s.
	StartWait time.Duration
	// FirstStartWait is the same wait for a member on its first start
	// (Member.FirstStart): a first `npx -y` or `uvx` download takes up to
	// a minute, and a connector that reads one tools/list at connect time
	// and never again would not see the member at all. Default 45s, below
	// the 60 s request timeout of the official SDK clients, so that a
	// longer download still leaves the client its other members.
	FirstStartWait time.Duration
	// PageSize is the most items a page of a merged list holds. Default
	// 0: the whole merged list in one page (many clients read only the
	// first page).
	PageSize int
	// MaxListBytes bounds the bytes the endpoint keeps of lists: a
	// member's list or a merged list larger is refused with an error
	// naming the config key gateway.endpoints.NAME.maxListBytes, and
	// merged lists past it are evicted least recently used first.
	// Default 256 MiB.
	MaxListBytes int64
	Logger       *slog.Logger
}

// Defaults of Options.
const (
	DefaultSeparator    = "__"
	DefaultMaxNameLen   = 64
	minMaxNameLen       = 16 // room for the hash suffix and some of the name
	defaultPollInterval = 500 * time.Millisecond
	// defaultStartWait and defaultFirstStartWait are the defaults of
	// Options.StartWait and Options.FirstStartWait.
	defaultStartWait      = 5 * time.Second
	defaultFirstStartWait = 45 * time.Second
	// DefaultMaxListBytes is the default of Options.MaxListBytes.
	DefaultMaxListBytes = 256 << 20
)

// Endpoint serves one endpoint's client sessions. See the package comment.
type Endpoint struct {
	// A session holds its members' sessions and the merged lists in this
	// replica.
	conn.OwnerBound

	// Static after New.
	opts   Options
	naming naming
	log    *slog.Logger
	nonce  string // in the ids of the endpoint's own requests

	nextID   atomic.Uint64
	inflight atomic.Int64 // client requests and the endpoint's own, in flight
	warned   sync.Map     // collisions logged

	// The lists, shared by every session (shared.go, viewcache.go).
	lists  interner
	views  viewCache
	lmu    sync.Mutex
	shared map[listsKey]*memberLists // guarded by lmu, as their contents

	stop chan struct{} // closed by Close: polling ends
	once sync.Once
	wg   sync.WaitGroup

	mu sync.Mutex
	// guarded by mu:
	closed   bool
	sessions map[*clientSession]struct{}
	// slots are the members by index, set by New and SetMembers
	// (members.go): an index is never given to another member's name.
	slots    []*slot
	tableVer uint64 // bumped by every SetMembers that changed a slot
}

// memberState is a member's state as last polled, and the capabilities it
// last initialized with.
type memberState struct {
	ready bool
	text  string
	seq   uint64 // bumped when ready changes
	// wasReady: it was ready once (a first start hides nothing).
	wasReady bool
	caps     caps
	known    bool // caps is known
}

// New returns the endpoint merging members, in that order (the order of
// its lists and cursors), and starts polling their states. Its errors are
// in the configuration: a member without a name or backend, two with the
// same name or the same non-empty prefix, a bad glob, a MaxNameLen too
// small to shorten names into. The gateway sets each member's Prefix (by
// default the server's name; "" is no prefix) and closes the members'
// backends itself, after Close.
func New(opts Options, members []Member) (*Endpoint, error) {
	if opts.Separator == "" {
		opts.Separator = DefaultSeparator
	}
	if opts.MaxNameLen == 0 {
		opts.MaxNameLen = DefaultMaxNameLen
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = defaultPollInterval
	}
	if opts.MaxListBytes <= 0 {
		opts.MaxListBytes = DefaultMaxListBytes
	}
	if opts.StartWait <= 0 {
		opts.StartWait = defaultStartWait
	}
	if opts.FirstStartWait <= 0 {
		opts.FirstStartWait = defaultFirstStartWait
	}
	if opts.PageSize < 0 {
		opts.PageSize = 0
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	names := naming{sep: opts.Separator, max: opts.MaxNameLen, snake: opts.SnakeCase}
	if err := checkMembers(opts, names, members); err != nil {
		return nil, err
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	e := &Endpoint{
		opts:     opts,
		naming:   names,
		log:      opts.Logger.With("endpoint", opts.Name),
		nonce:    hex.EncodeToString(nonce[:]),
		stop:     make(chan struct{}),
		sessions: map[*clientSession]struct{}{},
	}
	e.views.max = opts.MaxListBytes
	for _, m := range members {
		ready, text := pollMember(&m)
		e.slots = append(e.slots, newSlot(m, ready, text))
	}
	e.wg.Add(1)
	go e.pollLoop()
	return e, nil
}

// Open opens a client session of the endpoint: a session of each member.
// A critical member whose session cannot be opened fails it (its error,
// RetryAfter included, named); another is down for this session.
func (e *Endpoint) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	c, err := e.openSession(ctx, general, false, nil)
	if err != nil {
		return nil, err // not a nil *conn in an interface
	}
	return c, nil
}

// openSession is Open; stateless: for a stateless request declaring caps
// (see stateless.go).
func (e *Endpoint) openSession(ctx context.Context, general conn.Stream, stateless bool, caps []byte) (*clientSession, error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	c, err := e.open(ctx, general, stateless, caps)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		c.Close()
		return nil, errClosed
	}
	e.sessions[c] = struct{}{}
	e.mu.Unlock()
	// Members set while the members' sessions opened (SetMembers told
	// the sessions registered then, not this one), and the states polled
	// meanwhile (a session takes a state only if newer than what it has:
	// the poller may be telling it at the same time).
	c.reconcile()
	tab, _ := e.table()
	for i, s := range tab {
		c.memberState(i, s.gen, s.st.ready, s.st.seq)
	}
	return c, nil
}

var errClosed = errors.New("the gateway is shutting down")

// forget drops a closed session. With the last one gone, nobody hears
// the members' list_changed any longer: the shared lists are dropped too.
func (e *Endpoint) forget(c *clientSession) {
	e.mu.Lock()
	delete(e.sessions, c)
	last := len(e.sessions) == 0
	e.mu.Unlock()
	if last {
		e.dropShared()
	}
}

// Pending returns the requests the endpoint has in flight: its clients'
// (a member's requests are counted by the member too) and its own (lists,
// initializes) to members.
func (e *Endpoint) Pending() int { return int(e.inflight.Load()) }

// Ready reports whether every critical member is ready and, if not, the
// first one's state, for the gateway's readiness.
func (e *Endpoint) Ready() (bool, string) {
	tab, _ := e.table()
	for _, s := range tab {
		m := s.m
		if !m.Critical || s.removed || m.State == nil {
			continue
		}
		if ready, state := m.State(); !ready {
			return false, fmt.Sprintf("server %q (critical in endpoint %q) is %s", m.Name, e.opts.Name, state)
		}
	}
	return true, ""
}

// Close stops polling the members' states, and ends the sessions still
// open (the HTTP front ends its sessions before, so there are none unless
// one was opening meanwhile): their requests in flight are answered, and
// their members' sessions closed. The members themselves are closed by
// their owner (the gateway), after.
func (e *Endpoint) Close() {
	e.once.Do(func() {
		e.mu.Lock()
		e.closed = true
		left := make([]*clientSession, 0, len(e.sessions))
		for c := range e.sessions {
			left = append(left, c)
		}
		e.mu.Unlock()
		close(e.stop)
		e.wg.Wait()
		for _, c := range left {
			c.CloseWith(errClosed.Error())
		}
	})
}

// internalID returns the id of a request of the endpoint's own: a string
// no client can predict, so never the id of a client's request in flight
// on the same member session.
func (e *Endpoint) internalID() []byte {
	return quote("mcpgate-" + e.nonce + "-" + strconv.FormatUint(e.nextID.Add(1), 10))
}
