package servers

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// The sessions' pool of a shared server (config key "processes"): N
// processes of the same command, each with its own multiplexer, each
// initialized once by the gateway. The rest of the gateway sees one
// Backend: Open returns one connection per session, as with one process.
//
//   - A session is pinned to one process for its life, so what a server
//     keeps per connection (subscriptions, logging level, tasks) stays
//     coherent. It is placed when its first message arrives (its
//     initialize, which declares its client capabilities), not when it
//     opens: placement needs those capabilities.
//   - Placement: a process that is up (starting or ready) before one
//     backing off; then, for a session that declared sampling, elicitation
//     or roots (a "capable" session), the process with the fewest capable
//     sessions pinned, and for any other session the process without a
//     capable session before one with; then the fewest sessions pinned,
//     then the fewest requests in flight. A server request is attributed
//     only while one session has requests written to its process (mux
//     attributeLocked): a capable session alone on its process gets its
//     server's requests while there are at most N capable sessions, and
//     keeps them while the others' sessions can go elsewhere.
//   - Everything per process is the multiplexer's, as with one process:
//     notifications, list_changed (a session hears the one process it is
//     pinned to, so one change of that process is told once; a change
//     another process makes is its own state, not this session's),
//     resource subscriptions, logging levels, server requests, tasks.
//   - Each process is supervised on its own: a crash fails only its own
//     calls (its sessions get the crash as with one process, and carry on
//     once it is restarted and initialized again); the others serve on.
//   - Process 0 is shared.p: what has one answer for the server (Tools,
//     InitRefused, the reverse bridge's decision) asks it.
//
// Locking: sessionPool.mu guards the counts; pin reads each process's
// Mux state (Pending, State) under it, and nothing takes sessionPool.mu
// under a Mux's lock. A pinnedConn's mu is taken before sessionPool.mu,
// and never held while its client handles a message.

// poolProc is one process of the pool and what placement counts of it.
type poolProc struct {
	p *proc
	// guarded by sessionPool.mu:
	sessions int // sessions pinned to it and not closed
	capable  int // of those, sessions that declared a client capability
}

// sessionPool is the processes that serve a shared server's sessions.
type sessionPool struct {
	procs []*poolProc // static after construction; procs[0].p is shared.p

	mu sync.Mutex // guards the counts in procs
}

// placeKey orders the processes for a session: lower is better, compared
// field by field.
type placeKey struct {
	down     bool // backing off or failed: its requests would fail now
	capable  int  // capable sessions pinned (a capable session's first criterion)
	shared   bool // a capable session is pinned (a plain session's first criterion)
	sessions int
	inFlight int
}

func (k placeKey) less(o placeKey) bool {
	switch {
	case k.down != o.down:
		return !k.down
	case k.capable != o.capable:
		return k.capable < o.capable
	case k.shared != o.shared:
		return !k.shared
	case k.sessions != o.sessions:
		return k.sessions < o.sessions
	}
	return k.inFlight < o.inFlight
}

// pin picks the process for a new session (capable: it declared a client
// capability a server request needs) and counts the session on it.
func (sp *sessionPool) pin(capable bool) *poolProc {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var best *poolProc
	var bestKey placeKey
	for _, pp := range sp.procs {
		k := placeKey{down: !pp.p.usable(), sessions: pp.sessions, inFlight: pp.p.m.Pending()}
		if capable {
			k.capable = pp.capable
		} else {
			k.shared = pp.capable > 0
		}
		if best == nil || k.less(bestKey) {
			best, bestKey = pp, k
		}
	}
	best.sessions++
	if capable {
		best.capable++
	}
	return best
}

// unpin uncounts a session pinned to pp.
func (sp *sessionPool) unpin(pp *poolProc, capable bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	pp.sessions--
	if capable {
		pp.capable--
	}
}

// counts returns the sessions pinned to each process, in pool order.
func (sp *sessionPool) counts() []int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n := make([]int, len(sp.procs))
	for i, pp := range sp.procs {
		n[i] = pp.sessions
	}
	return n
}

// pinnedConn is a session's connection on a pool: a client of the one
// process it is pinned to on its first message.
type pinnedConn struct {
	pool    *sessionPool
	general conn.Stream

	mu sync.Mutex
	// guarded by mu:
	c       *mux.Client // nil before the first message
	pp      *poolProc
	capable bool
	closed  bool
	why     string // CloseWith's reason
}

// client returns the connection's client, pinning it by msg (the first
// message) if it has none; nil once closed.
func (pc *pinnedConn) client(msg *jsonrpc.Message) *mux.Client {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return nil
	}
	if pc.c == nil {
		// Placed under mu: a second message waits for the first's process
		// rather than being placed on its own.
		pc.capable = declaresCapability(msg)
		pc.pp = pc.pool.pin(pc.capable)
		pc.c = pc.pp.p.m.Join(pc.general)
	}
	return pc.c
}

// declaresCapability reports whether msg is an initialize whose client
// declares sampling, elicitation or roots: what a server request needs.
func declaresCapability(msg *jsonrpc.Message) bool {
	if msg.Kind != jsonrpc.KindRequest || !msg.MethodIs(protocol.MethodInitialize) {
		return false
	}
	var m struct {
		Params struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(msg.Raw, &m) != nil {
		return false
	}
	// Any mode of elicitation counts (eras.ParseCapSet counts form mode
	// only, for what a translation process declares): a server may ask
	// a client in url mode too.
	for _, k := range []string{"sampling", "elicitation", "roots"} {
		if v := m.Params.Capabilities[k]; len(v) > 0 && string(v) != "null" {
			return true
		}
	}
	return false
}

// Handle implements conn.Conn.
func (pc *pinnedConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	c := pc.client(msg)
	if c == nil {
		if msg.Kind == jsonrpc.KindRequest {
			out.Reply(jsonrpc.ErrorResponse(msg.Bytes(msg.ID), protocol.CodeServerError, pc.closedText()))
		}
		return
	}
	c.Handle(ctx, msg, out)
}

func (pc *pinnedConn) closedText() string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.why != "" {
		return "mcpgate: " + strings.TrimPrefix(pc.why, "mcpgate: ")
	}
	return "mcpgate: session closed"
}

// Version implements conn.Conn.
func (pc *pinnedConn) Version() string {
	pc.mu.Lock()
	c := pc.c
	pc.mu.Unlock()
	if c == nil {
		return ""
	}
	return c.Version()
}

// Abandon implements conn.Conn.
func (pc *pinnedConn) Abandon(out conn.Stream) {
	pc.mu.Lock()
	c := pc.c
	pc.mu.Unlock()
	if c != nil {
		c.Abandon(out)
	}
}

// Close implements conn.Conn.
func (pc *pinnedConn) Close() { pc.CloseWith("") }

// CloseWith implements conn.Conn: the client's own CloseWith answers its
// requests in flight; the session is uncounted from its process.
func (pc *pinnedConn) CloseWith(reason string) {
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return
	}
	pc.closed, pc.why = true, reason
	c, pp, capable := pc.c, pc.pp, pc.capable
	pc.mu.Unlock()
	if c == nil {
		return
	}
	c.CloseWith(reason)
	pc.pool.unpin(pp, capable)
}

// Interface guards.
var _ conn.Conn = (*pinnedConn)(nil)
