package mux

// ServerRequests returns how many requests of the server wait for a
// client's answer (routed to a client, not answered yet). A stateless
// client's server request is answered only when its retry comes, so while
// it waits its request still counts as written to the process, and no
// other client's server request can be attributed there: the backend
// starts such requests elsewhere.
func (m *Mux) ServerRequests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.serverReqs)
}
