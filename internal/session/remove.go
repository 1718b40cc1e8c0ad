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
	return out
}
