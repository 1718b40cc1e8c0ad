package session

import "time"

// Establish records that the session was established at now: its
// initialize succeeded (a legacy session: its stream opened). The HTTP
// front logs the opening of an established session, and its end; a
// stateless request's session is never established.
func (s *Session) Establish(now time.Time) { s.estab.Store(now.UnixNano()) }

// Established returns when Establish was called, and false if it was not.
func (s *Session) Established() (time.Time, bool) {
	return unixTime(s.estab.Load())
}

// TakeEstablished is Established, for the first caller only: of two
// callers ending the session, one logs its end.
func (s *Session) TakeEstablished() (time.Time, bool) {
	return unixTime(s.estab.Swap(0))
}

func unixTime(n int64) (time.Time, bool) {
	if n == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// Requests returns how many requests the session took (NewStream, Expect).
func (s *Session) Requests() uint64 { return s.reqs.Load() }
