package servers

import (
	"context"
	"slices"

	"github.com/mcpgate/mcpgate/internal/mux"
)

// The prewarm pool of a session-mode server (config key "prewarm").
//
// A pooled process is started before any session asks for it: its
// supervisor, reader and writer run, and its Mux is ready for the client's
// initialize (which, one process per session, is the client's own and is
// forwarded when the session comes). A session that takes one pays neither
// for the spawn nor for the server's own startup.
//
//   - Open takes the newest pooled process whose Mux is starting or ready.
//     A pooled process that exited is restarted in place by its supervisor
//     (with the usual backoff, so a server that cannot stay up does not
//     spin); meanwhile Open passes it over and starts a fresh process, so
//     a session does not get "not available" when a new start would serve
//     it. Only at the cap, with nothing else, does Open hand one out: its
//     error then names the real cause.
//   - One goroutine, the filler, keeps Prewarm processes pooled within
//     maxProcesses (pooled processes count against it). It is woken when a
//     session takes a pooled process or starts its own, and when a stopped
//     process frees a slot, so a pool drained at the cap fills again as
//     soon as sessions end, not on the next Open. It starts one process at
//     a time; a session arriving while the pool is empty starts its own
//     rather than queue behind it. The refill starts at once: on 2 cores
//     the new process's startup slows the taker's initialize by a few
//     tenths of a millisecond, and waking the filler only after that
//     initialize was answered just moved the cost onto the first call.
//   - At the cap with the pool empty, an Open waits for the process the
//     filler is starting (it holds the last slot), bounded by the request's
//     context, instead of being refused while that process is on its way.
//   - Close stops pooled processes with the rest; a process the filler is
//     starting is stopped by the filler when it sees closed.

// filler keeps Prewarm processes pooled. Close ends it.
func (s *isolated) filler() {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-s.fill:
		}
		for s.fillOne() {
		}
	}
}

// fillOne starts one process for the pool if the pool is short and a slot
// is free, and reports whether it pooled one.
func (s *isolated) fillOne() bool {
	s.mu.Lock()
	if s.closed || len(s.pool) >= s.cfg.Prewarm || !s.reserve() {
		s.mu.Unlock()
		return false
	}
	s.filling = true
	s.mu.Unlock()

	p, err := s.spawn(context.Background()) // no request: remotes are not prewarmed

	s.mu.Lock()
	s.filling = false
	s.wakeWaitersLocked()
	switch {
	case err != nil:
		s.count--
		s.mu.Unlock()
		// Not retried until the next wake-up: a spawn fails here only for
		// a config that cannot run at all (a missing command is retried
		// by the process's own supervisor, pooled).
		s.log.Error("prewarming a process failed", "server", s.cfg.Name, "err", err)
		return false
	case s.closed:
		s.mu.Unlock()
		p.stop()
		s.release()
		return false
	}
	s.pool = append(s.pool, p)
	s.mu.Unlock()
	return true
}

// refill wakes the filler, if there is one; it never blocks.
func (s *isolated) refill() {
	if s.cfg.Prewarm == 0 {
		return
	}
	select {
	case s.fill <- struct{}{}:
	default:
	}
}

// takePooledLocked removes and returns the newest usable pooled process,
// or, at the cap, any pooled one; nil if there is none to take. Called
// with mu held.
func (s *isolated) takePooledLocked() *proc {
	i := len(s.pool) - 1
	for i >= 0 && !s.pool[i].usable() {
		i--
	}
	if i < 0 {
		if len(s.pool) == 0 || s.max == 0 || s.count < s.max {
			return nil // a fresh process is the better bet
		}
		i = len(s.pool) - 1
	}
	p := s.pool[i]
	s.pool = slices.Delete(s.pool, i, i+1) // clears the freed slot
	return p
}

// wakeWaitersLocked wakes the Opens waiting at the cap for the filler's
// process. Called with mu held.
func (s *isolated) wakeWaitersLocked() {
	close(s.pooled)
	s.pooled = make(chan struct{})
}

// usable reports whether p can serve a session now: its process is up
// (being initialized counts: requests wait for that), not backing off
// after an exit. It takes p's Mux lock, never s.mu.
func (p *proc) usable() bool {
	switch p.m.State().Phase {
	case mux.Starting, mux.Ready:
		return true
	}
	return false
}
