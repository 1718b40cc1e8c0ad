package session

import "time"

// Directory is where the HTTP front keeps its sessions: every session is
// created, looked up and deleted through it. Store, in memory, is the
// first implementation; a directory shared by replicas is the next.
//
// A method that deletes hands each session it returns to exactly one
// caller, who closes it (the package comment's "Ending a session"): a
// session deleted twice is returned once. Implementations are safe for
// concurrent use and call out of the package with no lock held.
type Directory interface {
	// Create makes a session on server (a target's key) owned by owner
	// (Session.Owner), or returns ErrTooMany.
	Create(server, owner string, now time.Time) (*Session, error)
	// Adopt is Create under an id the caller chose, or ErrExists when a
	// session has it.
	Adopt(id, server, owner string, now time.Time) (*Session, error)
	// Lookup returns the session with id, or nil.
	Lookup(id string) *Session
	// Delete takes the session with id out, or returns nil when it is not
	// there (already deleted).
	Delete(id string) *Session
	// DeleteTarget takes out every session of server: a reload took the
	// target away or replaced it.
	DeleteTarget(server string) []*Session
	// DeleteAll takes out every session: the front is closing.
	DeleteAll() []*Session
	// Expire takes out the sessions idle past the directory's idle
	// timeout at now.
	Expire(now time.Time) []*Session
	// Snapshot returns the live sessions at one instant, for a caller
	// that reads them without holding the directory (metrics, the admin
	// API, the sweep).
	Snapshot() []*Session
	// Len returns the number of live sessions.
	Len() int
}

// Store is a Directory.
var _ Directory = (*Store)(nil)

// Prune drops, in every session of d, the streams whose resume grace
// ended by now (Session.Prune). Each session is pruned under its own lock
// only, never the directory's.
func Prune(d Directory, now time.Time) {
	for _, s := range d.Snapshot() {
		s.Prune(now)
	}
}
