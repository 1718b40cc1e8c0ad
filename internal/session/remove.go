package session

// DeleteTarget removes and returns every session of server (Session.Server:
// a target's key), for a reload that takes the target away or replaces it.
// Like Delete, it hands each session to one caller, who closes it.
func (st *Store) DeleteTarget(server string) []*Session {
	var out []*Session
	st.mu.Lock()
	for id, s := range st.sessions {
		if s.Server == server {
			delete(st.sessions, id)
			out = append(out, s)
		}
	}
	st.mu.Unlock()
	markRemoved(out)
	return out
}

// OnRemoved calls f once s has been taken out of its Store (Delete,
// DeleteTarget, Expire, DeleteAll), on the goroutine that took it out and
// after the Store's lock is released; at once if it already has been. What
// counts a principal's live sessions (limits) keeps its count this way
// instead of walking them. f must not block.
func (s *Session) OnRemoved(f func()) {
	s.mu.Lock()
	if !s.removed {
		s.onRemoved = append(s.onRemoved, f)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	f()
}

// markRemoved runs s's OnRemoved functions, once: a Store hands each
// session it takes out to one caller.
func (s *Session) markRemoved() {
	s.mu.Lock()
	if s.removed {
		s.mu.Unlock()
		return
	}
	s.removed = true
	hooks := s.onRemoved
	s.onRemoved = nil
	s.mu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// markRemoved runs the OnRemoved functions of every session of out.
func markRemoved(out []*Session) {
	for _, s := range out {
		s.markRemoved()
	}
}
