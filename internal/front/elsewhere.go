package front

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file serves the requests for a session this replica does not hold
// (replicas.go): a portable session is resumed here from its handoff
// record; an owner-bound one is forwarded to its owner (forward.go); a
// session whose owner is gone, that was deleted, or that is no session of
// this cluster's is unknown (404), so that its client initializes again.

// whereabouts is what elsewhere decided.
type whereabouts int

const (
	here      whereabouts = iota // the session is (now) in this replica's directory, or unknown: go on here
	forwarded                    // the request was answered by the owner, through this replica
	refused                      // the request was answered here (403: a forged hop; 404: the owner is unreachable)
)

// hopHeader marks a request one replica forwarded to another: a token
// sealed by the cluster's key ring, which clients cannot make.
const hopHeader = "Mcp-Gateway-Hop"

// hopPurpose is what a hop token is sealed for; hopTTL bounds its life.
const (
	hopPurpose = "mcpgate hop"
	hopTTL     = 30 * time.Second
)

// elsewhere handles a request for session id (of target name; a legacy
// one's sessionId when legacy) when the cluster is on. It returns here
// when the request goes on in this replica: the session lives here (it
// may have just been resumed), or it is unknown and the caller answers
// 404 as it always did.
func (h *Handler) elsewhere(w http.ResponseWriter, r *http.Request, name string, be *served, id string, legacy bool) whereabouts {
	cl := h.cfg.Cluster
	if cl == nil || id == "" {
		return here
	}
	hop := r.Header.Get(hopHeader)
	if hop != "" {
		if _, err := h.cfg.Seal.Open(hopPurpose, hop); err != nil {
			writeError(w, http.StatusForbidden, protocol.CodeInvalidRequest, "mcpgate: "+hopHeader+" is not a replica's (forged, or sealed with a retired key)")
			return refused
		}
	}
	if s := h.store.Lookup(id); s != nil {
		if s.Value() == nil {
			// Maybe being resumed (resumeSession puts the session in the
			// directory before its connection is there): the request
			// goes on once it is, or finds the session gone if it failed.
			h.awaitResume(r.Context(), id)
		}
		if hop == "" && isStandaloneGET(r) && s.Handoff() != nil {
			return h.standaloneAtOwner(w, r, name, id)
		}
		if hop != "" && s.Handoff() != nil && r.Method == http.MethodPost {
			// Another replica forwarded a request for a portable session:
			// it found no handoff record (the store restarted empty, say).
			// Stored again, the session is portable again.
			h.publishHandoff(s)
		}
		return here
	}
	c, err := openID(h.cfg.Seal, name, id)
	if err != nil || c.legacy != legacy || c.principal != principalHash(h.owner(r)) {
		return here // not a session of this target and principal: 404
	}
	if hop == "" && isStandaloneGET(r) {
		if c.instance != cl.Instance() {
			if alive, known := cl.Alive(c.instance); alive || !known {
				if h.forward(w, r, c.advertise) {
					return forwarded
				}
			}
		}
	}
	if !legacy {
		switch h.resumeSession(r, name, be, id) {
		case resumed, gone:
			return here
		}
	}
	if c.instance == cl.Instance() || hop != "" {
		// An owner-bound session that ended here (this process, or a
		// process of this instance before a restart, opened it), or
		// another replica thought this one holds it: at most one hop,
		// then 404.
		return here
	}
	if h.forwardToOwner(w, r, c.instance, c.advertise) { // forward.go
		return forwarded
	}
	// The owner could not be reached, and its session is gone with it.
	// Answered here: the forward may have spent the request's body (an
	// owner that died after reading it), which the transport would then
	// find malformed.
	msg := "mcpgate: session not found (expired or deleted); initialize again"
	if legacy {
		msg = "mcpgate: session not found (its stream closed); open a new one"
	}
	writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, msg)
	return refused
}

// resumption is what resumeSession did.
type resumption int

const (
	ownerBound resumption = iota // no handoff record, or the backend's sessions are owner-bound: forward
	resumed                      // the session is in this replica's directory now
	gone                         // deleted on another replica, or it cannot be resumed here: 404
)

// resumeSession brings portable session id into this replica from its handoff
// record. One resume of an id runs at a time in a replica; the requests
// for it that come meanwhile wait for its outcome.
func (h *Handler) resumeSession(r *http.Request, name string, be *served, id string) resumption {
	cl := h.cfg.Cluster
	rec, stateV, err := cl.State(r.Context(), id)
	if err != nil || rec == nil {
		// None (an owner-bound session), or the store cannot tell: the
		// owner, if it lives, still can.
		return ownerBound
	}
	version, state, ok := parseHandoffRecord(rec)
	if !ok {
		h.log.Warn("a session's handoff record does not parse; its client must initialize again", "session", logID(id), logTarget(name))
		return gone
	}
	h.resumeMu.Lock()
	if wait := h.resuming[id]; wait != nil {
		h.resumeMu.Unlock()
		select {
		case <-wait:
		case <-r.Context().Done():
		}
		if h.store.Lookup(id) != nil {
			return resumed
		}
		return gone
	}
	done := make(chan struct{})
	h.resuming[id] = done
	h.resumeMu.Unlock()
	defer func() {
		h.resumeMu.Lock()
		delete(h.resuming, id)
		h.resumeMu.Unlock()
		close(done)
	}()
	if h.store.Lookup(id) != nil {
		return resumed
	}
	if h.closing.Load() {
		// (A draining replica still resumes: it serves the requests that
		// reach it until it closes, and the session goes on elsewhere.)
		return gone
	}
	now := time.Now()
	s, err := h.store.Adopt(id, name, h.owner(r), now)
	if err != nil {
		if errors.Is(err, session.ErrExists) {
			return resumed
		}
		return gone
	}
	h.numberStreams(s) // sharedstreams.go
	s.AdoptHandoff(state, stateV)
	s.Begin()
	defer s.End(time.Now())
	// Asked once the session is in the directory: a revocation that comes
	// after the answer finds it there (Revoked) and ends it, and the
	// resume below then sees it ended (settled).
	if revoked, _ := cl.Revoked(r.Context(), id); revoked {
		// (The store failing here, just after it answered, is taken as
		// not revoked: Revoke deleted the record it gave.)
		h.store.Delete(s.ID)
		s.Close(conn.ReasonDeleted)
		return gone
	}
	ctx := h.withGeneralHeld(h.withStateUpdates(h.withHandoff(r.Context(), s), s), s) // statesync.go, stream.go
	c, err := be.Resume(ctx, h.generalStream(s), state)
	if err != nil {
		h.store.Delete(s.ID)
		s.Close("the session could not be resumed")
		if errors.Is(err, conn.ErrNotPortable) {
			return ownerBound
		}
		h.log.Warn("resuming a session from another replica failed; its client must initialize again", "session", logID(id), logTarget(name), "err", err)
		return gone
	}
	s.SetValue(c)
	s.SetVersion(version)
	caughtUp(s, stateV) // statesync.go
	if reason := h.settled(s, name, be); reason != "" {
		h.store.Delete(s.ID)
		h.end(s, reason)
		return gone
	}
	h.forwards.resumed.Add(1)
	h.established(s, name, transportStreamable, version) // sessionlog.go
	return resumed
}

// awaitResume waits for the resume of session id in progress here, if
// any, or for ctx to end.
func (h *Handler) awaitResume(ctx context.Context, id string) {
	h.resumeMu.Lock()
	wait := h.resuming[id]
	h.resumeMu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
		}
	}
}

// settled checks a session whose connection was just opened (or resumed)
// against what may have happened meanwhile, and returns why it must end,
// or "". The gateway may have begun to close (Close took the session out
// of the store, finding no connection to close yet, or came before the
// session was in the store); a reload may have replaced the
// target after the request took its snapshot and before the session was
// in the store, where its CloseTarget would have found it, leaving the
// session on a stopped backend. The swap comes before CloseTarget, so one
// of the two sees the other (targets.go).
func (h *Handler) settled(s *session.Session, name string, be *served) string {
	if h.closing.Load() || h.store.Lookup(s.ID) != s {
		return "the gateway is shutting down"
	}
	if h.replaced(name, be) {
		return reasonReconfigured
	}
	return ""
}

// reasonReconfigured is settled's reason for a target a reload replaced.
const reasonReconfigured = "the server's config changed"

// withHandoff returns ctx with the sink session s's backend hands its
// state to (conn.Handoff): the state is kept on the session under its
// next version (statesync.go), and, once the session's version is
// negotiated, stored for the other replicas. Without a cluster there is
// no sink: nobody else resumes a session, and a backend that sees none
// ends its upstream session with the client's.
func (h *Handler) withHandoff(ctx context.Context, s *session.Session) context.Context {
	cl := h.cfg.Cluster
	if cl == nil {
		return ctx
	}
	tie := session.Tiebreak(cl.Instance())
	return conn.WithHandoff(ctx, func(state []byte) {
		s.NextHandoff(bytes.Clone(state), tie) // the caller's to keep
		if s.Version() != "" {
			h.publishHandoff(s)
		}
	})
}

// publishHandoff stores session s's handoff record (its newest state, at
// its version) in the cluster's store, off the caller's path: a store
// that is slow or down delays no reply. A newer record stored by another
// replica meanwhile is kept, and this replica fetches it (statesync.go).
func (h *Handler) publishHandoff(s *session.Session) {
	h.unstored.Store(s.ID, s) // until the store confirms a record (StoreHandoffs)
	h.closers.add()
	go func() {
		defer h.closers.done()
		stored, err := h.storeHandoff(context.Background(), s)
		if err != nil {
			return
		}
		h.unstored.CompareAndDelete(s.ID, s)
		if !stored {
			h.queueState(s.ID, false)
		}
	}()
}

// StoreHandoffs stores, as this replica begins to stop, the handoff
// records of the sessions it holds that the store has not confirmed (a
// store that failed, or is still slow to answer), so that another
// replica can resume them once this one is gone: a portable session
// opened just before a rolling restart reached this replica, its record
// lost with it, would be lost too (the other replicas forward its
// requests here, then answer 404). Bounded by ctx; it returns how many
// records were stored and how many the store refused.
func (h *Handler) StoreHandoffs(ctx context.Context) (stored, failed int) {
	if h.cfg.Cluster == nil {
		return 0, 0
	}
	h.unstored.Range(func(id, v any) bool {
		s := v.(*session.Session)
		if h.store.Lookup(s.ID) != s {
			h.unstored.CompareAndDelete(id, v) // ended: it needs no record
			return true
		}
		if ctx.Err() != nil {
			failed++
			return true
		}
		if _, err := h.storeHandoff(ctx, s); err != nil {
			failed++
			return true
		}
		stored++
		h.unstored.CompareAndDelete(id, v)
		return true
	})
	return stored, failed
}

// storeHandoff writes session s's handoff record, and reports whether
// the store kept it (false, without an error, when it holds a newer one).
func (h *Handler) storeHandoff(ctx context.Context, s *session.Session) (bool, error) {
	c, err := openID(h.cfg.Seal, s.Server, s.ID)
	version := s.Version()
	state, v := s.HandoffAt()
	if err != nil || version == "" || state == nil {
		return true, nil // not a sealed id (minted before the cluster was on), or nothing to store yet
	}
	expiry := c.created.Add(h.cfg.SessionMaxAge)
	stored, err := h.cfg.Cluster.SetState(ctx, s.ID, v, handoffRecord(version, state), expiry)
	if err != nil {
		h.forwards.storeErrors.Add(1)
		if ok, held := h.openFailures.Allow(time.Now()); ok {
			h.log.Warn("storing a session's handoff record failed: another replica cannot resume it, nor the replicas holding it see the change until the store is back", "session", logID(s.ID), "err", err, "suppressed", held)
		}
	}
	return stored, err
}

// revoke ends portable session s on every replica: its client deleted it.
func (h *Handler) revoke(s *session.Session) {
	if h.cfg.Cluster == nil || s.Handoff() == nil {
		return
	}
	c, err := openID(h.cfg.Seal, s.Server, s.ID)
	if err != nil {
		return
	}
	if err := h.cfg.Cluster.Revoke(context.Background(), s.ID, c.created.Add(h.cfg.SessionMaxAge)); err != nil {
		h.forwards.storeErrors.Add(1)
		h.log.Warn("revoking a deleted session on the other replicas failed: they may serve it until it expires", "session", logID(s.ID), "err", err)
	}
}

// Revoked ends session id here, if this replica holds it: it was deleted
// on another replica (internal/cluster tells every replica).
func (h *Handler) Revoked(id string) {
	if s := h.store.Delete(id); s != nil {
		h.endAsync(s, conn.ReasonDeleted)
	}
}

// OwnerBound returns how many sessions this replica holds that no other
// replica can serve (no handoff record): a draining replica in a cluster
// keeps serving them, forwarded to it, until its drain timeout.
func (h *Handler) OwnerBound() int {
	n := 0
	for _, s := range h.store.Snapshot() {
		if s.Handoff() == nil {
			n++
		}
	}
	return n
}

// isStandaloneGET reports whether r opens a session's standalone stream
// (a GET not resuming a POST's stream).
func isStandaloneGET(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == ""
}

// standaloneAtOwner serves the standalone stream of portable session id,
// which this replica resumed, at the replica that opened it while that
// one lives: the server's own messages (notifications, its requests)
// arrive on the upstream stream the owner holds (a server gives a session
// one), so the client's stream must be there to get them. Once the owner
// is gone, this replica serves it, and its connection takes the upstream
// stream over.
func (h *Handler) standaloneAtOwner(w http.ResponseWriter, r *http.Request, name, id string) whereabouts {
	c, err := openID(h.cfg.Seal, name, id)
	if err != nil || c.instance == h.cfg.Cluster.Instance() {
		return here
	}
	if alive, known := h.cfg.Cluster.Alive(c.instance); known && !alive {
		return here
	}
	if h.forward(w, r, c.advertise) {
		return forwarded
	}
	return here
}
