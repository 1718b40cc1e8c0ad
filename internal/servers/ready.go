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

// Ready implements Server from the mux State of the process that serves
// the sessions: the gateway-initialized one, or the 2026-07-28 one when
// the sessions take the reverse bridge.
func (s *shared) Ready() (bool, string) {
	s.mu.Lock()
	closed, reverse, mp := s.closed, s.reverse, s.modern
	s.mu.Unlock()
	switch {
	case closed:
		return false, "failed: the gateway is shutting down"
	case s.p != nil && !reverse:
		return stateText(s.p.m.State())
	case mp != nil:
		return stateText(mp.m.State())
	}
	return true, "" // the reverse bridge's process starts on demand
}

// FirstStart implements Server from the process that serves the
// sessions, as Ready does.
func (s *shared) FirstStart() bool {
	s.mu.Lock()
	closed, reverse, mp := s.closed, s.reverse, s.modern
	s.mu.Unlock()
	switch {
	case closed:
		return false
	case s.p != nil && !reverse:
		return s.p.m.FirstStart()
	case mp != nil:
		return mp.m.FirstStart()
	}
	return false
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
