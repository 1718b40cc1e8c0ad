package session

import (
	"strings"
	"time"
)

// ByPrefix returns the live sessions whose id starts with prefix (the one
// whose id is prefix, alone, when there is one). It scans every session:
// for administration (the admin API), not for the request path.
func (st *Store) ByPrefix(prefix string) []*Session {
	st.mu.RLock()
	defer st.mu.RUnlock()
	if s := st.sessions[prefix]; s != nil {
		return []*Session{s}
	}
	var out []*Session
	for id, s := range st.sessions {
		if strings.HasPrefix(id, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// Activity returns how many requests in flight and open streams the
// session has now, and when its activity last ended.
func (s *Session) Activity() (active int, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active, s.lastActive
}
