package aggregate

import (
	"sync"
	"time"
)

// This file is the members' states as the endpoint sees them: polled
// (Member.State) to hide a member that is down from every session and show
// it again, and read afresh when a client initializes.

// poll reads member i's state.
func (e *Endpoint) poll(i int) (bool, string) {
	if e.members[i].State == nil {
		return true, "ready"
	}
	return e.members[i].State()
}

// state returns member i's state as last polled.
func (e *Endpoint) state(i int) memberState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.states[i]
}

// pollLoop polls the members' states until Close.
func (e *Endpoint) pollLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		for i := range e.members {
			e.refresh(i)
		}
	}
}

// refresh reads member i's state now and, when it became ready or stopped
// being ready, tells every session (seq orders what two refreshes at once
// tell). It returns the state.
func (e *Endpoint) refresh(i int) memberState {
	m := &e.members[i]
	if m.State == nil {
		return e.state(i)
	}
	ready, text := m.State()
	e.mu.Lock()
	st := &e.states[i]
	changed := st.ready != ready
	st.ready, st.text = ready, text
	var sessions []*conn
	back := false
	if changed {
		st.seq++
		back = ready && st.wasReady
		st.wasReady = st.wasReady || ready
		sessions = make([]*conn, 0, len(e.sessions))
		for c := range e.sessions {
			sessions = append(sessions, c)
		}
	}
	cur := *st
	e.mu.Unlock()
	if !changed {
		return cur
	}
	if ready {
		// Back from a restart, it may list other things.
		e.invalidate(m, 1<<numKinds-1)
	}
	switch {
	case back:
		e.log.Info("member ready again: shown", "server", m.Name)
	case ready: // its first start: nothing was hidden
		e.log.Debug("member ready", "server", m.Name)
	case cur.wasReady:
		e.log.Info("member not ready: hidden", "server", m.Name, "state", text)
	default:
		e.log.Debug("member not ready", "server", m.Name, "state", text)
	}
	for _, c := range sessions {
		c.memberState(i, ready, cur.seq)
	}
	return cur
}

// rememberCaps records what member i initialized with, for sessions that
// initialize while it is down.
func (e *Endpoint) rememberCaps(i int, c caps) {
	e.mu.Lock()
	e.states[i].caps, e.states[i].known = c, true
	e.mu.Unlock()
}

// knownCaps returns member i's capabilities as last seen, or every list
// when never seen.
func (e *Endpoint) knownCaps(i int) caps {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.states[i].known {
		return capTools | capPrompts | capResources
	}
	return e.states[i].caps
}

// logHidden logs that member i is hidden from a session (every session
// initialized while it is down would say so: one line a second).
func (e *Endpoint) logHidden(i int, err error) {
	if ok, n := e.hidden[i].allow(); ok {
		e.log.Info("member hidden from a session: its initialize failed", "server", e.members[i].Name, "err", err, "suppressed", n)
	}
}

// rateLimit lets one log line of a kind through per second and counts the
// others.
type rateLimit struct {
	mu         sync.Mutex
	next       time.Time
	suppressed int
}

func (r *rateLimit) allow() (bool, int) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Before(r.next) {
		r.suppressed++
		return false, 0
	}
	r.next = now.Add(time.Second)
	n := r.suppressed
	r.suppressed = 0
	return true, n
}
