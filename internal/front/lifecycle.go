package front

import (
	"context"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/session"
)

// This file ends sessions: idle expiry, shutdown, and the bookkeeping that
// lets Close wait (bounded) for the handlers still writing replies.
//
// Ending a session is always in the same order: its connection closes first
// (which answers every request in flight with a JSON-RPC error on its
// stream), then its streams close, so each waiting handler writes that
// error and returns. Closing the streams first would wake the handlers
// before the errors are there: a 202 with no body.

// closeParallel bounds the session closes Sweep and Close run at once.
const closeParallel = 32

// closeWait bounds how long Close waits for sessions to end and for the
// handlers writing their last replies; the last handlerWait of it is kept
// for the handlers, even when connections were slow to close.
const (
	closeWait   = 2 * time.Second
	handlerWait = 250 * time.Millisecond
)

// Run expires idle sessions until ctx ends.
func (h *Handler) Run(ctx context.Context) {
	t := time.NewTicker(h.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.Sweep(now)
		}
	}
}

// Sweep ends the sessions idle at now for longer than the idle timeout, and
// drops the finished streams whose resume grace ended (Config.ResumeGrace)
// from the others. It never waits for a session to end: each closes in a
// goroutine Close waits for, so one slow server cannot hold up the expiry
// of every other session.
func (h *Handler) Sweep(now time.Time) {
	session.Prune(h.store, now)
	for _, s := range h.store.Expire(now) {
		h.endAsync(s, "the session expired") // logged by end
	}
	if h.limits != nil {
		// Sessions that ended here stop counting for their principal on
		// the other replicas too (limits.Shared).
		h.limits.Sweep()
	}
}

// Drain refuses new sessions and ends standalone streams (a legacy session's
// stream once its requests in flight are answered), so that an
// http.Server.Shutdown waits only for requests in flight.
func (h *Handler) Drain() {
	h.once.Do(func() {
		h.draining.Store(true)
		close(h.drain)
	})
}

// Close ends every session, in parallel: their requests in flight are
// answered with JSON-RPC errors on their streams. It waits, at most about
// two seconds, for the sessions to end and for the handlers writing those
// replies to return. Safe to call more than once and concurrently with
// requests (which then find no session).
func (h *Handler) Close() {
	h.closing.Store(true)
	h.Drain()
	h.parking.Close() // their sessions end below
	deadline := time.Now().Add(closeWait)
	const reason = "the gateway is shutting down"
	sessions := h.store.DeleteAll()
	for _, s := range sessions {
		h.endAsync(s, reason)
	}
	if h.limits != nil {
		// They stop counting for their principals on the other replicas
		// (limits.Shared): a rolling restart must not leave them counted.
		h.limits.Sweep()
	}
	if !h.closers.wait(time.Until(deadline) - handlerWait) {
		// A connection that does not close in time must not keep its
		// clients waiting: their handlers answer for it.
		h.log.Warn("sessions did not end in time; closing their streams", "wait", closeWait)
		for _, s := range sessions {
			s.Close(reason)
		}
	}
	if !h.handlers.wait(time.Until(deadline)) {
		h.log.Warn("requests still being answered at shutdown", "wait", closeWait)
	}
	h.forwardTransport.CloseIdleConnections() // forward.go
}

// end ends a session taken out of the store: connection first, then streams.
// The connection is taken from the session, so that of two callers racing
// to end it (Close, and an open that saw Close come), one closes it. An
// established session's end is logged first (sessionlog.go): stopping its
// process may take a while.
func (h *Handler) end(s *session.Session, reason string) {
	h.unstored.CompareAndDelete(s.ID, s) // an ended session needs no record stored (elsewhere.go)
	h.logEnded(s, reason)
	if c := s.TakeValue(); c != nil {
		c.CloseWith(reason) // as complete as Close (conn.Conn)
	}
	s.Close(reason)
}

// logIDLen is how much of a session id is logged: the id is the session's
// only credential, so logs carry just enough to tell sessions apart.
const logIDLen = 8

// logID returns the part of session id id that may be logged.
func logID(id string) string {
	if len(id) > logIDLen {
		return id[:logIDLen]
	}
	return id
}

// endAsync ends a session in a goroutine tracked by h.closers, at most
// closeParallel at once.
func (h *Handler) endAsync(s *session.Session, reason string) {
	h.closers.add()
	go func() {
		defer h.closers.done()
		h.closeSem <- struct{}{}
		defer func() { <-h.closeSem }()
		h.end(s, reason)
	}()
}

// tracker counts work in progress and lets a caller wait, bounded, until
// there is none. The zero value is ready.
type tracker struct {
	mu sync.Mutex
	// guarded by mu:
	n    int
	idle []chan struct{} // closed when n drops to 0
}

func (t *tracker) add() {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
}

func (t *tracker) done() {
	t.mu.Lock()
	t.n--
	if t.n == 0 {
		for _, c := range t.idle {
			close(c)
		}
		t.idle = nil
	}
	t.mu.Unlock()
}

// wait reports whether the count reached 0 within d.
func (t *tracker) wait(d time.Duration) bool {
	t.mu.Lock()
	if idle := t.n == 0; idle || d <= 0 {
		t.mu.Unlock()
		return idle
	}
	c := make(chan struct{})
	t.idle = append(t.idle, c)
	t.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-c:
		return true
	case <-timer.C:
		return false
	}
}
