package front

import (
	"context"
	"sync"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file keeps the portable sessions this replica holds at the newest
// handoff state any replica stored (conn.WithStateUpdates): several
// replicas hold one session at once behind a round-robin proxy, and a
// change made through one of them (a reverse-bridge session's
// logging/setLevel or resources/subscribe, a remote's renewed upstream
// session) reaches the connections the others hold.
//
// Each state a session's connection hands off here gets the next version
// of the session (session.StateVersion: a Lamport clock, ties broken by
// this replica's instance); the store keeps the newest of the versions
// written and announces it (internal/cluster: one script, then pub/sub);
// a replica holding the session with an older version fetches the state
// and gives it to its connection's apply function. An older state never
// replaces a newer one, in the store or in a connection.
//
// Nothing of this is on a request's path: the announcement's callback
// (StateChanged, on the cluster's subscriber goroutine) does a map lookup
// and a compare and queues the session id; one goroutine of the Handler
// drains the queue (fetch, then apply), and exits when it is empty. The
// queue is a set of session ids, so it is bounded by the sessions held.
//
// Redis down: a change still applies to the connection that made it (the
// handoff sink keeps it on the session first), and its write fails
// (counted as a store error); the replicas holding the session catch up
// once Redis is back, when each one's subscription is in place again
// (Resync): every replica writes the state of each portable session it
// holds again (the store keeps the newest, and announces a state only
// when it stores it) and fetches the store's when its own was not the
// newest. A replica that resumes the session later reads the newest state
// as before.

// stateSync is the queue of sessions whose newer state is to be fetched
// and applied.
type stateSync struct {
	mu sync.Mutex
	// guarded by mu:
	pending map[string]bool // session id -> write this replica's state again first (Resync)
	running bool            // a drain goroutine runs
}

// StateChanged is told by the cluster (internal/cluster's OnStateChange)
// that version v of session id's handoff state was stored. A session held
// here at an older version is queued for fetching and applying; nothing
// blocks.
func (h *Handler) StateChanged(id string, v session.StateVersion) {
	s := h.store.Lookup(id)
	if s == nil {
		return
	}
	if state, held := s.HandoffAt(); state == nil || !v.Newer(held) {
		return // owner-bound, or as new already (this replica wrote it)
	}
	h.queueState(id, false)
}

// Resync is told by the cluster that its subscription is (back) in
// place: what was announced while it was down was missed, and what this
// replica wrote meanwhile may not be stored (see above). Every portable
// session held is queued to be written again, then fetched if another
// replica's state is newer.
func (h *Handler) Resync() {
	if h.cfg.Cluster == nil {
		return
	}
	for _, s := range h.store.Snapshot() {
		if s.Handoff() != nil {
			h.queueState(s.ID, true)
		}
	}
}

// queueState adds session id to the queue, and starts its drain if none
// runs.
func (h *Handler) queueState(id string, rewrite bool) {
	q := &h.stateSync
	q.mu.Lock()
	if q.pending == nil {
		q.pending = map[string]bool{}
	}
	q.pending[id] = q.pending[id] || rewrite
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		h.closers.add()
		go h.drainStates()
	}
}

// drainStates syncs the queued sessions one at a time until the queue is
// empty.
func (h *Handler) drainStates() {
	defer h.closers.done()
	q := &h.stateSync
	for {
		q.mu.Lock()
		var id string
		var rewrite bool
		for id, rewrite = range q.pending {
			break
		}
		if id == "" || h.closing.Load() {
			// (Closing: the sessions are ending; Close waits for this
			// goroutine, which must not take a store round trip each.)
			clear(q.pending)
			q.running = false
			q.mu.Unlock()
			return
		}
		delete(q.pending, id)
		q.mu.Unlock()
		h.syncState(id, rewrite)
	}
}

// syncState brings session id, if held here, to the store's newest state:
// after writing its own again when rewrite, fetched only when the store
// has a newer one.
func (h *Handler) syncState(id string, rewrite bool) {
	s := h.store.Lookup(id)
	if s == nil {
		return
	}
	// (A session being resumed takes the newer state too: given to its
	// connection if the backend registered already, else by caughtUp.)
	ctx := context.Background() // the store bounds each call
	if rewrite {
		stored, err := h.storeHandoff(ctx, s)
		if err == nil {
			h.unstored.CompareAndDelete(id, s)
		}
		if err != nil || stored {
			return // the store is down again, or held nothing newer
		}
	}
	rec, v, err := h.cfg.Cluster.State(ctx, id)
	if err != nil || rec == nil {
		return
	}
	if _, held := s.HandoffAt(); !v.Newer(held) {
		return
	}
	_, state, ok := parseHandoffRecord(rec)
	if !ok {
		return
	}
	apply, newer := s.AdoptHandoff(state, v)
	if !newer || apply == nil {
		return
	}
	// A change the connection made while apply ran was versioned after
	// the state applied, and apply may have undone it in the connection:
	// the session's newest state is applied again until none came.
	for {
		apply(state)
		cur, curV := s.HandoffAt()
		if curV == v {
			return
		}
		state, v = cur, curV
	}
}

// caughtUp gives session s's connection, just resumed from the state of
// version from, the newer state the session took while Resume ran (an
// announcement that came before the backend registered its apply
// function), if any.
func caughtUp(s *session.Session, from session.StateVersion) {
	state, v := s.HandoffAt()
	if apply := s.Apply(); v != from && apply != nil {
		apply(state)
	}
}

// withStateUpdates returns ctx with the registration of session s's
// apply function (conn.WithStateUpdates), when the cluster is on.
func (h *Handler) withStateUpdates(ctx context.Context, s *session.Session) context.Context {
	if h.cfg.Cluster == nil {
		return ctx
	}
	return conn.WithStateUpdates(ctx, s.SetApply)
}
