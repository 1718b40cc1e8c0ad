package session

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTooMany is returned by Store.Create when the store is full.
var ErrTooMany = errors.New("session: too many sessions")

// maxRetainedStreams bounds the finished-but-unread POST streams a session
// keeps for Last-Event-ID resumption; the oldest finished one goes first.
const maxRetainedStreams = 64

// Session is one client session.
type Session struct {
	// Static after construction.
	ID     string // at least 128 random bits, URL-safe base64: visible ASCII
	Server string // the server name the session was opened on

	replay int // events kept per stream
	legacy atomic.Bool

	mu sync.Mutex
	// guarded by mu:
	version    string
	value      any
	streams    map[uint64]*Stream // POST streams not yet fully read
	order      []uint64           // stream ids by creation, for retention
	nextStream uint64
	general    *Stream
	active     int // requests in flight and streams open
	lastActive time.Time
	closed     bool
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

// Value returns what the owner stored with SetValue.
func (s *Session) Value() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value
}

// SetValue stores the owner's per-session state (the HTTP front keeps the
// multiplexer connection here).
func (s *Session) SetValue(v any) {
	s.mu.Lock()
	s.value = v
	s.mu.Unlock()
}

// General returns the standalone stream (id 0): messages not tied to a request.
func (s *Session) General() *Stream { return s.general }

// NewStream opens a stream for a POST carrying `requests` requests.
func (s *Session) NewStream(requests int) *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextStream++
	st := newStream(s.nextStream, s.replay, requests)
	if s.closed {
		st.closed = true
		return st
	}
	s.streams[st.id] = st
	s.order = append(s.order, st.id)
	if len(s.order) > maxRetainedStreams {
		s.evictLocked()
	}
	return st
}

func (s *Session) evictLocked() {
	for i, id := range s.order {
		if st := s.streams[id]; st != nil && st.Complete() {
			delete(s.streams, id)
			s.order = append(s.order[:i], s.order[i+1:]...)
			return
		}
	}
}

// Stream returns stream id (0: the standalone stream), or nil.
func (s *Session) Stream(id uint64) *Stream {
	if id == 0 {
		return s.general
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

// Forget drops a POST stream whose events were all read.
func (s *Session) Forget(st *Stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[st.id] != st {
		return
	}
	delete(s.streams, st.id)
	for i, id := range s.order {
		if id == st.id {
			s.order = append(s.order[:i], s.order[i+1:]...)
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

// close closes every stream of the session so their readers return.
func (s *Session) close() {
	s.mu.Lock()
	s.closed = true
	streams := make([]*Stream, 0, len(s.streams)+1)
	streams = append(streams, s.general)
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.streams = map[uint64]*Stream{}
	s.order = nil
	s.mu.Unlock()
	for _, st := range streams {
		st.Close()
	}
}

// Store holds the live sessions.
type Store struct {
	max    int
	idle   time.Duration
	replay int

	mu sync.RWMutex
	// guarded by mu:
	sessions map[string]*Session
}

// NewStore returns a store holding at most max sessions (0: no limit) that
// expire after idle without activity, each stream keeping replay events.
func NewStore(max int, idle time.Duration, replay int) *Store {
	return &Store{max: max, idle: idle, replay: replay, sessions: map[string]*Session{}}
}

// Create makes a session on server, or returns ErrTooMany.
func (st *Store) Create(server string, now time.Time) (*Session, error) {
	id, err := newID()
	if err != nil {
		return nil, err
	}
	s := &Session{
		ID: id, Server: server, replay: st.replay,
		streams: map[uint64]*Stream{}, general: newStream(0, st.replay, 0), lastActive: now,
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.max > 0 && len(st.sessions) >= st.max {
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

// Get returns the session with id, or nil.
func (st *Store) Get(id string) *Session {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.sessions[id]
}

// Remove takes a session out of the store and closes its streams. It returns
// nil if the session was not there (already removed), so exactly one caller
// gets to clean up after it.
func (st *Store) Remove(id string) *Session {
	st.mu.Lock()
	s := st.sessions[id]
	delete(st.sessions, id)
	st.mu.Unlock()
	if s != nil {
		s.close()
	}
	return s
}

// Expire removes and returns the sessions idle for longer than the store's
// idle timeout at now.
func (st *Store) Expire(now time.Time) []*Session {
	var out []*Session
	st.mu.Lock()
	for id, s := range st.sessions {
		if d, idle := s.idleSince(now); idle && d > st.idle {
			delete(st.sessions, id)
			out = append(out, s)
		}
	}
	st.mu.Unlock()
	for _, s := range out {
		s.close()
	}
	return out
}

// RemoveAll removes and returns every session.
func (st *Store) RemoveAll() []*Session {
	st.mu.Lock()
	out := make([]*Session, 0, len(st.sessions))
	for _, s := range st.sessions {
		out = append(out, s)
	}
	st.sessions = map[string]*Session{}
	st.mu.Unlock()
	for _, s := range out {
		s.close()
	}
	return out
}

// Len returns the number of live sessions.
func (st *Store) Len() int {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return len(st.sessions)
}
