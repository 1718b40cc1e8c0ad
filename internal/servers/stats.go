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

// Counters implements Server: the sessions' process, static after
// construction, or the 2026-07-28 one of a server pinned to that
// revision (it has no other).
func (s *shared) Counters() Counters {
	p := s.p
	if p == nil {
		s.mu.Lock()
		p = s.modern
		s.mu.Unlock()
	}
	if p == nil {
		return Counters{}
	}
	c := Counters{Mux: p.m.Stats()}
	if p.st != nil {
		c.Restarts = p.st.Stats().Restarts
	}
	return c
}

// Counters implements Server: none. A session's process comes and goes
// with it, and counters summed over them would go down.
func (s *isolated) Counters() Counters { return Counters{} }
