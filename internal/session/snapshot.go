package session

// Snapshot returns the live sessions at one instant, for a caller that
// reads them without holding the store (metrics at scrape time): the
// store's lock is held only to copy the table, never while a session's
// own lock is taken.
func (st *Store) Snapshot() []*Session {
	st.mu.RLock()
	out := make([]*Session, 0, len(st.sessions))
	for _, s := range st.sessions {
		out = append(out, s)
	}
	st.mu.RUnlock()
	return out
}
