package servers

import (
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/upstream/stdio"
)

// Counters are a shared server's counters, for the gateway's metrics: the
// multiplexer's of the process that serves its sessions, and how many
// times that process was restarted.
type Counters struct {
	Mux      mux.Stats
	Restarts uint64
}

// Counted is an optional interface of a Server with a process of its own
// (shared mode). Servers whose processes are per session do not implement
// it: theirs come and go with the sessions, and counters summed over them
// would go down.
type Counted interface {
	// Counters returns the counters now; each only grows. Safe for
	// concurrent use; it never waits on a process.
	Counters() Counters
}

// Counters implements Counted: the sessions' process, static after
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
	if st, ok := p.up.(*stdio.Stdio); ok {
		c.Restarts = st.Stats().Restarts
	}
	return c
}

var _ Counted = (*shared)(nil)
