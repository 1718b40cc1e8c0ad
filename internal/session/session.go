package session

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
)

// ErrTooMany is returned by Store.Create when the store is full.
var ErrTooMany = errors.New("session: too many sessions")

// ErrExists is returned by Store.Adopt when a session has that id.
var ErrExists = errors.New("session: a session has that id")

// maxRetainedStreams bounds the finished POST streams a session keeps for
// Last-Event-ID resumption (unread, or in their resume grace); the oldest
// finished one goes first.
const maxRetainedStreams = 64

// DefaultResumeGrace is how long a POST stream stays resumable after its
// handler wrote its last event (Limits.ResumeGrace). The last write of a
// response is not flushed before the handler returns: a client whose
// connection breaks right then has the final reply only in the stream, and
// comes back with Last-Event-ID within its retry delay (about a second).
const DefaultResumeGrace = 10 * time.Second

// Limits bound a Store. Zero values take the documented defaults.
type Limits struct {
	MaxSessions int           // 0: no limit
	IdleTimeout time.Duration // a session idle this long expires; 0: never
	// ReplayEvents is the events each stream keeps; 0: 512; negative: none
	// once a reader took them (events not yet taken are still kept, bounded
	// by ReplayBytes).
	ReplayEvents int
	// ReplayBytes bounds each stream's kept events (data plus 64 bytes
	// each); over it, non-final events are dropped first. Default 4 MiB.
	ReplayBytes int64
	// SessionReplayBytes bounds all of a session's streams: over it, the
	// finished streams nobody is reading (kept for resumption) are evicted,
	// oldest first. Default 16 MiB.
	SessionReplayBytes int64
	// ResumeGrace is how long a stream given to Session.Finish stays
	// resumable; 0: DefaultResumeGrace; negative: it is forgotten at once.
	ResumeGrace time.Duration
}

func (l *Limits) defaults() {
	if l.ReplayEvents == 0 {
		l.ReplayEvents = 512
	}
	if l.ReplayBytes <= 0 {
		l.ReplayBytes = 4 << 20
	}
	if l.SessionReplayBytes <= 0 {
		l.SessionReplayBytes = 16 << 20
	}
	if l.ResumeGrace == 0 {
		l.ResumeGrace = DefaultResumeGrace
	}
}

// Session is one client session.
type Session struct {
	// Static after construction.
	ID     string // at least 128 random bits, URL-safe base64: visible ASCII
	Server string // the server name the session was opened on
	// Owner is who opened the session (the HTTP front's key of an
	// authenticated principal; "" when anyone may use it): the front
	// serves the session to its owner only.
	Owner  string
	limits *Limits

	legacy  atomic.Bool
	bytes   atomic.Int64  // kept by the streams the session holds
	evicted atomic.Uint64 // streams evicted by the byte bound or the count bound
	reqs    atomic.Uint64 // requests taken: NewStream's and Expect's
	estab   atomic.Int64  // Establish's time in Unix nanoseconds; 0: not established

	mu sync.Mutex
	// guarded by mu:
	version    string
	handoff    []byte       // SetHandoff's
	handoffV   StateVersion // handoff's version (handoff.go)
	apply      func([]byte) // applies a newer handoff state to value (handoff.go); nil: none
	held       func(bool)   // tells value the general stream is held here (general.go); nil: none
	value      conn.Conn
	streams    map[uint64]*Stream // POST streams not yet fully read, or in their resume grace
	order      []retained         // streams by creation, for retention
	pruneAt    time.Time          // the earliest graceEnd in order; zero: none
	nextStream uint64
	general    *Stream
	active     int // requests in flight and streams open
	lastActive time.Time
	closed     bool
	reason     string   // why the session was closed
	removed    bool     // taken out of its Store (markRemoved)
	onRemoved  []func() // OnRemoved's, run once it is
}

// retained is a stream a session holds. Its grace lives here, not in the
// Stream, so that a request's stream stays within its allocation size class.
type retained struct {
	id       uint64
	graceEnd time.Time // when the resume grace given by Finish ends; zero: not finished
}

// Legacy reports whether the session speaks the 2024-11-05 HTTP+SSE
// transport (its replies all go on its one SSE stream).
func (s *Session) Legacy() bool { return s.legacy.Load() }

// SetLegacy marks a 2024-11-05 HTTP+SSE session.
func (s *Session) SetLegacy() { s.legacy.Store(true) }

// Version returns the protocol version negotiated for the session.
func (s *Session) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// SetVersion records the negotiated protocol version.
func (s *Session) SetVersion(v string) {
	s.mu.Lock()
	s.version = v
	s.mu.Unlock()
}

// Handoff returns the last state the session's connection handed off
// (conn.Handoff): what another replica needs to resume it; nil for a
// session that is not portable.
func (s *Session) Handoff() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handoff
}

// SetHandoff records the state the session's connection handed off.
func (s *Session) SetHandoff(state []byte) {
	s.mu.Lock()
	s.handoff = state
	s.mu.Unlock()
}

// Value returns the session's connection to its server, as the owner
// stored it with SetValue (nil before, and once taken).
func (s *Session) Value() conn.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value
}

// SetValue stores the session's connection to its server (typed, so that
// no owner type-asserts what it gets back).
func (s *Session) SetValue(v conn.Conn) {
	s.mu.Lock()
	s.value = v
	s.mu.Unlock()
}

// TakeValue returns what SetValue stored and clears it, atomically: of
// several callers racing to release the value (to close a connection), at
// most one gets it.
func (s *Session) TakeValue() conn.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.value
	s.value = nil
	return v
}

// General returns the standalone stream (id 0): messages not tied to a request.
func (s *Session) General() *Stream { return s.general }

// NewStream opens a stream for a POST carrying `requests` requests. now is
// the time of the POST: the streams whose resume grace ended by then are
// dropped first.
func (s *Session) NewStream(requests int, now time.Time) *Stream {
	s.reqs.Add(uint64(requests))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked(now)
	s.nextStream++
	st := newStream(s.nextStream, s.limits.ReplayEvents, s.limits.ReplayBytes, requests)
	if s.closed {
		st.closed = true
		return st
	}
	st.owner = s // not yet shared: no lock needed
	s.streams[st.id] = st
	s.order = append(s.order, retained{id: st.id})
	if len(s.order) > maxRetainedStreams {
		for i, r := range s.order {
			if old := s.streams[r.id]; old.Complete() {
				// A reader still attached keeps the stream's events (the
				// check and the release are one step under its lock, so a
				// reader attaching meanwhile is never left with nothing):
				// only resumption is lost.
				n, evicted := old.disown(true)
				s.removeLocked(i, old, n, evicted && r.graceEnd.IsZero())
				break
			}
		}
	}
	return st
}

// removeLocked takes the stream at s.order[i], which kept n bytes, out of the
// session.
func (s *Session) removeLocked(i int, st *Stream, n int64, evicted bool) {
	delete(s.streams, st.id)
	s.order = append(s.order[:i], s.order[i+1:]...)
	s.bytes.Add(-n)
	if evicted {
		s.evicted.Add(1)
	}
}

// trim evicts finished streams nobody reads, oldest first, while the
// session is over its byte bound. A stream with a reader attached (a final
// reply someone waits for) is never evicted.
func (s *Session) trim() {
	if s.bytes.Load() <= s.limits.SessionReplayBytes {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < len(s.order) && s.bytes.Load() > s.limits.SessionReplayBytes; {
		r := s.order[i]
		st := s.streams[r.id]
		if n, ok := st.evict(); ok {
			s.removeLocked(i, st, n, r.graceEnd.IsZero())
			continue
		}
		i++
	}
}

// Evicted returns how many finished streams the session let go before a
// client read or resumed them (over its byte or stream-count bound). A
// stream cut short in its resume grace is not counted: it was written out.
func (s *Session) Evicted() uint64 { return s.evicted.Load() }

// Bytes returns the bytes kept by the session's streams.
func (s *Session) Bytes() int64 { return s.bytes.Load() }

// Stream returns stream id (0: the standalone stream), or nil.
func (s *Session) Stream(id uint64) *Stream {
	if id == 0 {
		return s.general
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

// Finish marks a POST stream whose events were all written to its client at
// now. It stays resumable with Last-Event-ID for the session's ResumeGrace
// (the last write may be lost with a connection that breaks right then), is
// dropped by the first NewStream or Prune after that, and may be evicted
// before then by the session's bounds, oldest finished first. A stream kept
// with no events for replay (ReplayEvents < 0) has nothing to resume and is
// forgotten at once. Finish again (after a resumption) restarts the grace.
func (s *Session) Finish(st *Stream, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[st.id] != st {
		return
	}
	if s.limits.ResumeGrace < 0 || st.keep < 0 {
		s.forgetLocked(st)
		return
	}
	end := now.Add(s.limits.ResumeGrace)
	for i := range s.order {
		if s.order[i].id == st.id {
			s.order[i].graceEnd = end
			break
		}
	}
	if s.pruneAt.IsZero() || end.Before(s.pruneAt) {
		s.pruneAt = end
	}
}

// Prune drops the streams whose resume grace ended by now (see Finish).
// The HTTP front calls it from its idle sweep, so a session that opens no
// new stream does not keep finished ones.
func (s *Session) Prune(now time.Time) {
	s.mu.Lock()
	s.pruneLocked(now)
	s.mu.Unlock()
}

// pruneLocked is Prune; it costs one comparison unless a grace ended.
func (s *Session) pruneLocked(now time.Time) {
	if s.pruneAt.IsZero() || now.Before(s.pruneAt) {
		return
	}
	var next time.Time
	for i := 0; i < len(s.order); {
		r := s.order[i]
		switch {
		case r.graceEnd.IsZero():
		case !now.Before(r.graceEnd):
			// A client resuming it right now keeps the events it
			// attached to (disown releases none under a reader).
			st := s.streams[r.id]
			n, _ := st.disown(true)
			s.removeLocked(i, st, n, false)
			continue
		case next.IsZero() || r.graceEnd.Before(next):
			next = r.graceEnd
		}
		i++
	}
	s.pruneAt = next
}

// Forget drops a POST stream at once: its client cannot resume it (it got
// a JSON body, or left before it had an event id).
func (s *Session) Forget(st *Stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[st.id] != st {
		return
	}
	s.forgetLocked(st)
}

func (s *Session) forgetLocked(st *Stream) {
	for i, r := range s.order {
		if r.id == st.id {
			n, _ := st.disown(false)
			s.removeLocked(i, st, n, false)
			break
		}
	}
}

// Begin marks the start of activity (a request in flight or an open stream):
// an active session never expires.
func (s *Session) Begin() {
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
}

// End marks the end of activity begun with Begin.
func (s *Session) End(now time.Time) {
	s.mu.Lock()
	s.active--
	s.lastActive = now
	s.mu.Unlock()
}

// Touch records activity that has no duration (a notification, a response).
func (s *Session) Touch(now time.Time) {
	s.mu.Lock()
	s.lastActive = now
	s.mu.Unlock()
}

func (s *Session) idleSince(now time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active > 0 {
		return 0, false
	}
	return now.Sub(s.lastActive), true
}

// Close ends the session: every stream is closed so its readers return
// (after taking the events already there). reason says why, for the replies
// the HTTP front writes itself to requests that got none. The owner of the
// session's connection closes that first, so that the requests in flight are
// answered on their streams before the streams close. Close is idempotent.
func (s *Session) Close(reason string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.reason = reason
	streams := make([]*Stream, 0, len(s.streams)+1)
	streams = append(streams, s.general)
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.streams = map[uint64]*Stream{}
	s.order = nil
	s.pruneAt = time.Time{}
	s.mu.Unlock()
	for _, st := range streams {
		st.Close()
	}
}

// CloseReason returns the reason given to Close ("" while open).
func (s *Session) CloseReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Store holds the live sessions in memory: the first Directory. Taking a
// session out of the store (Delete, DeleteTarget, Expire, DeleteAll) does
// not close it: the caller closes the session's connection, then calls
// Session.Close.
type Store struct {
	limits Limits

	mu sync.RWMutex
	// guarded by mu:
	sessions map[string]*Session
}

// NewStore returns a store bounded by l.
func NewStore(l Limits) *Store {
	l.defaults()
	return &Store{limits: l, sessions: map[string]*Session{}}
}

// Create makes a session on server owned by owner (Session.Owner), or
// returns ErrTooMany.
func (st *Store) Create(server, owner string, now time.Time) (*Session, error) {
	id, err := newID()
	if err != nil {
		return nil, err
	}
	return st.Adopt(id, server, owner, now)
}

// Adopt makes a session under id, which the caller chose (a sealed id:
// one the front minted, or one opened on another replica), or returns
// ErrTooMany, or ErrExists when a session with that id lives.
func (st *Store) Adopt(id, server, owner string, now time.Time) (*Session, error) {
	l := &st.limits
	s := &Session{
		ID: id, Server: server, Owner: owner, limits: l,
		streams: map[uint64]*Stream{}, general: newStream(0, l.ReplayEvents, l.ReplayBytes, 0), lastActive: now,
	}
	s.general.owner = s
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.sessions[id] != nil {
		return nil, ErrExists
	}
	if st.limits.MaxSessions > 0 && len(st.sessions) >= st.limits.MaxSessions {
		return nil, ErrTooMany
	}
	st.sessions[id] = s
	return s, nil
}

func newID() (string, error) {
	var b [24]byte // 192 bits
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Lookup returns the session with id, or nil.
func (st *Store) Lookup(id string) *Session {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.sessions[id]
}

// Delete takes a session out of the store. It returns nil if the session
// was not there (already removed), so exactly one caller gets to close it.
func (st *Store) Delete(id string) *Session {
	st.mu.Lock()
	s := st.sessions[id]
	delete(st.sessions, id)
	st.mu.Unlock()
	if s != nil {
		s.markRemoved()
	}
	return s
}

// Expire removes and returns the sessions idle for longer than the store's
// idle timeout at now.
func (st *Store) Expire(now time.Time) []*Session {
	var out []*Session
	st.mu.Lock()
	for id, s := range st.sessions {
		if d, idle := s.idleSince(now); idle && st.limits.IdleTimeout > 0 && d > st.limits.IdleTimeout {
			delete(st.sessions, id)
			out = append(out, s)
		}
	}
	st.mu.Unlock()
	markRemoved(out)
	return out
}

// DeleteAll removes and returns every session.
func (st *Store) DeleteAll() []*Session {
	st.mu.Lock()
	out := make([]*Session, 0, len(st.sessions))
	for _, s := range st.sessions {
		out = append(out, s)
	}
	st.sessions = map[string]*Session{}
	st.mu.Unlock()
	markRemoved(out)
	return out
}

// Len returns the number of live sessions.
func (st *Store) Len() int {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return len(st.sessions)
}
