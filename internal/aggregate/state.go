package aggregate

import (
	"sync"
	"time"
)

// This file is the members' states as the endpoint sees them: polled
// (Member.State) to hide a member that is down from every session and show
// it again, and read afresh when a client initializes.

// state returns member i's state as last polled.
func (e *Endpoint) state(i int) memberState {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slots[i].st
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
		e.mu.Lock()
		n := len(e.slots)
		e.mu.Unlock()
		for i := range n {
			e.refresh(i)
		}
	}
}

// refresh reads member i's state now and, when it became ready or stopped
// being ready, tells every session (seq orders what two refreshes at once
// tell). It returns the state. A removed member's state is left as it is.
func (e *Endpoint) refresh(i int) memberState {
	e.mu.Lock()
	s := e.slots[i]
	m, gen, removed := s.m, s.gen, s.removed
	e.mu.Unlock()
	if removed || m.State == nil {
		return e.state(i)
	}
	ready, text := m.State()
	e.mu.Lock()
	st := &s.st
	if s.gen != gen {
		// SetMembers replaced the member meanwhile: what was read is the
		// old one's.
		cur := *st
		e.mu.Unlock()
		return cur
	}
	changed := st.ready != ready
	st.ready, st.text = ready, text
	var sessions []*clientSession
	back := false
	if changed {
		st.seq++
		back = ready && st.wasReady
		st.wasReady = st.wasReady || ready
		sessions = make([]*clientSession, 0, len(e.sessions))
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
		e.invalidate(listsKey{i, gen}, 1<<numKinds-1)
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
		c.memberState(i, gen, ready, cur.seq)
	}
	return cur
}

// rememberCaps records what member mc initialized with, for sessions that
// initialize while it is down.
func (e *Endpoint) rememberCaps(mc *member, c caps) {
	e.mu.Lock()
	if s := e.slots[mc.i]; s.gen == mc.gen {
		s.st.caps, s.st.known = c, true
	}
	e.mu.Unlock()
}

// knownCaps returns member i's capabilities as last seen, or every list
// when never seen.
func (e *Endpoint) knownCaps(i int) caps {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.slots[i].st.known {
		return capTools | capPrompts | capResources
	}
	return e.slots[i].st.caps
}

// logHidden logs that member mc is hidden from a session (every session
// initialized while it is down would say so: one line a second).
func (e *Endpoint) logHidden(mc *member, err error) {
	if ok, n := e.slotAt(mc.i).hidden.allow(); ok {
		e.log.Info("member hidden from a session: its initialize failed", "server", mc.m.Name, "err", err, "suppressed", n)
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
