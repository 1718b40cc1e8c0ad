package servers

import (
	"fmt"
	"time"

	"github.com/mcpgate/mcpgate/internal/mux"
)

// This file is a Server's readiness (see Server): a shared server's is the
// mux State of the process that serves its sessions; a server whose
// processes are per session has none of its own.

// PerSession implements Server: one process serves every session.
func (s *shared) PerSession() bool { return false }

// Ready implements Server from the mux State of the processes that serve
// the sessions: the gateway-initialized ones, or the 2026-07-28 ones when
// the sessions take the reverse bridge. With several (config
// "processes"), the server is ready while one of them is, and otherwise
// in the best state of theirs (starting before backing off before
// failed): a session is placed on a process that is up.
func (s *shared) Ready() (bool, string) {
	s.mu.Lock()
	closed, reverse, mp := s.closed, s.reverse, s.modern
	s.mu.Unlock()
	switch {
	case closed:
		return false, "failed: the gateway is shutting down"
	case s.p != nil && !reverse:
		return stateText(bestState(s.sessionsProcs()))
	case mp != nil:
		return stateText(bestState(mp))
	}
	return true, "" // the reverse bridge's process starts on demand
}

// bestState returns the state of procs that serves best: ready, starting,
// backing off, failed, in that order.
func bestState(procs []*proc) mux.State {
	rank := func(ph mux.Phase) int {
		switch ph {
		case mux.Ready:
			return 0
		case mux.Starting:
			return 1
		case mux.BackingOff:
			return 2
		}
		return 3
	}
	var best mux.State
	for i, p := range procs {
		if st := p.m.State(); i == 0 || rank(st.Phase) < rank(best.Phase) {
			best = st
		}
	}
	return best
}

// FirstStart implements Server from the processes that serve the
// sessions, as Ready does: true while none of them has been ready.
func (s *shared) FirstStart() bool {
	s.mu.Lock()
	closed, reverse, mp := s.closed, s.reverse, s.modern
	s.mu.Unlock()
	procs := mp
	switch {
	case closed:
		return false
	case s.p != nil && !reverse:
		procs = s.sessionsProcs()
	}
	for _, p := range procs {
		if !p.m.FirstStart() {
			return false
		}
	}
	return len(procs) > 0
}

// stateText words a mux State for Ready.
func stateText(st mux.State) (bool, string) {
	text := st.Phase.String()
	switch st.Phase {
	case mux.Ready:
		return true, ""
	case mux.Starting:
		return false, text
	}
	if st.Reason != nil {
		text += ": " + st.Reason.Error()
	}
	if st.Phase == mux.BackingOff {
		if d := time.Until(st.RetryAt); !st.RetryAt.IsZero() && d > 0 {
			text += fmt.Sprintf("; retrying in %v", d.Round(100*time.Millisecond))
		} else {
			text += "; restarting"
		}
	}
	return false, text
}

// PerSession implements Server: each session has its own process or
// upstream session.
func (s *isolated) PerSession() bool { return true }

// Ready implements Server: there is no state of its own; it is only known
// to be down when a session's own process or upstream is.
func (s *isolated) Ready() (bool, string) { return true, "per session" }

// FirstStart implements Server: there is no process of its own to wait for.
func (s *isolated) FirstStart() bool { return false }
