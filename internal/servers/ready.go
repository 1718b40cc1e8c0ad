package servers

import (
	"fmt"
	"time"

	"github.com/mcpgate/mcpgate/internal/mux"
)

// Readier is an optional interface of a Server whose readiness is known
// ahead of any session: a shared server, whose one process (or, pinned to
// 2026-07-28, whose process of that revision) serves every session. An
// endpoint polls it to hide a member that is down and show it again.
// Servers that start a process or an upstream session per client session
// (isolation "session", remotes) do not implement it: they are only known
// to be down when a session's own process or upstream is.
type Readier interface {
	// Ready reports whether the server is ready and, if not, its state in
	// words: "starting", "backing off: command not found: uvx; retrying
	// in 3s", "failed: ...".
	Ready() (ready bool, state string)
}

// Ready implements Readier from the mux State of the process that serves
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

// FirstStarter is an optional interface of a Server whose first start is
// known: a shared server, while its process has never been ready (a first
// npx -y download). An endpoint waits longer for such a member when a
// client initializes.
type FirstStarter interface {
	FirstStart() bool
}

// FirstStart implements FirstStarter from the process that serves the
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

// stateText words a mux State for Readier.
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

var _ Readier = (*shared)(nil)
