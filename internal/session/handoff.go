package session

import (
	"crypto/sha256"
	"encoding/binary"
)

// This file versions the handoff state of a portable session (a session
// any replica may serve; conn.Handoff), so that the replicas holding it
// agree on its newest state whatever order their updates reach the store
// in.

// StateVersion orders the handoff states of one session: a Lamport clock,
// N being one more than the highest version its writer had seen, and
// ties (two replicas changing the session at once, from the same version)
// broken by Tie, a number of the writer's instance (Tiebreak). The zero
// StateVersion is older than every state.
type StateVersion struct {
	N   uint64
	Tie uint64
}

// Newer reports whether v orders after o.
func (v StateVersion) Newer(o StateVersion) bool {
	return v.N > o.N || v.N == o.N && v.Tie > o.Tie
}

// Tiebreak is the Tie of the versions instance writes: 48 bits of a hash
// of its id, a number rather than the id so that a store's script compares
// it exactly as Newer does (a string compare there may follow a locale).
func Tiebreak(instance string) uint64 {
	h := sha256.Sum256([]byte(instance))
	return binary.BigEndian.Uint64(h[:8]) >> 16
}

// HandoffVersion returns the version of the session's handoff state.
func (s *Session) HandoffVersion() StateVersion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handoffV
}

// NextHandoff records state, which this replica's connection just handed
// off, under the next version this replica writes (tie: its Tiebreak),
// and returns that version.
func (s *Session) NextHandoff(state []byte, tie uint64) StateVersion {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handoff = state
	s.handoffV = StateVersion{N: s.handoffV.N + 1, Tie: tie}
	return s.handoffV
}

// AdoptHandoff records state, of version v, read from the store, if v is
// newer than the session's, and returns the function that applies it to
// the session's connection (nil: none registered), and whether it was
// newer. The caller calls apply, outside any lock.
func (s *Session) AdoptHandoff(state []byte, v StateVersion) (apply func([]byte), newer bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !v.Newer(s.handoffV) {
		return nil, false
	}
	s.handoff, s.handoffV = state, v
	return s.apply, true
}

// SetApply registers apply, the function that gives the session's
// connection a newer handoff state (conn.OnStateUpdate).
func (s *Session) SetApply(apply func(state []byte)) {
	s.mu.Lock()
	s.apply = apply
	s.mu.Unlock()
}

// HandoffAt returns the session's handoff state and its version, read
// together.
func (s *Session) HandoffAt() ([]byte, StateVersion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handoff, s.handoffV
}

// Apply returns the function registered by SetApply, or nil.
func (s *Session) Apply() func(state []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.apply
}
