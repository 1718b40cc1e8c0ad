package session

// This file keeps, for a session resumed from another replica, the
// function telling its connection that the client's standalone stream is
// held here (conn.WithGeneralHeld).

// SetGeneralHeld registers held, the function the front calls when the
// session's standalone stream attaches (true) and detaches (false).
func (s *Session) SetGeneralHeld(held func(bool)) {
	s.mu.Lock()
	s.held = held
	s.mu.Unlock()
}

// GeneralHeld returns the function registered by SetGeneralHeld, or nil.
func (s *Session) GeneralHeld() func(bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}
