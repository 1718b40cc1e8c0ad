package servers

import (
	"github.com/mcpgate/mcpgate/internal/mux"
)

// Counters are a shared server's counters, for the gateway's metrics: the
// multiplexer's of the process that serves its sessions, and how many
// times that process was restarted. Zero for a server whose processes are
// per session (see Server).
type Counters struct {
	Mux      mux.Stats
	Restarts uint64
}

// Counters implements Server: the sum over the processes that serve the
// sessions (the pool's, config "processes"), or the 2026-07-28 ones of a
// server pinned to that revision (it has no other). Each process's own
// counters are in Info's Pool.
func (s *shared) Counters() Counters {
	procs := s.sessionsProcs()
	if procs == nil {
		s.mu.Lock()
		procs = s.modern
		s.mu.Unlock()
	}
	var c Counters
	for _, p := range procs {
		c.Mux = c.Mux.Plus(p.m.Stats())
		if p.st != nil {
			c.Restarts += p.st.Stats().Restarts
		}
	}
	return c
}

// Counters implements Server: none. A session's process comes and goes
// with it, and counters summed over them would go down.
func (s *isolated) Counters() Counters { return Counters{} }
