package session

import (
	"strings"
	"time"
)

// ByPrefix returns the live sessions of d whose id starts with prefix
// (the one whose id is prefix, alone, when there is one). It scans every
// session: for administration (the admin API), not for the request path.
func ByPrefix(d Directory, prefix string) []*Session {
	if s := d.Lookup(prefix); s != nil {
		return []*Session{s}
	}
	var out []*Session
	for _, s := range d.Snapshot() {
		if strings.HasPrefix(s.ID, prefix) {
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
