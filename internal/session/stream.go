package session

import (
	"errors"
	"strconv"
	"strings"
	"sync"
)

// ErrLost is returned by Stream.Next when events after the requested one were
// already dropped from the stream's bounded buffer: the reader cannot resume
// without a gap and should close the stream.
var ErrLost = errors.New("session: events were dropped from the stream buffer")

// Event is one message on a stream.
type Event struct {
	Seq   uint64 // 1, 2, ... within its stream
	Data  []byte // one JSON-RPC message; never modified after Append
	Final bool   // the reply to one of the stream's requests
}

// Stream is the event log of one SSE stream (or JSON reply) of a session: the
// stream of a POST that carried requests, or the session's standalone stream.
// Appending never blocks: the log keeps the last Cap events and drops the
// oldest beyond that, counting the drop. Readers take events with Next and
// wait on Wake.
type Stream struct {
	id       uint64
	capacity int
	want     int // finals that complete the stream; 0 for the standalone stream

	mu sync.Mutex
	// guarded by mu:
	ring      []Event // ring buffer; ring[(head+i)%len] for i < n
	head, n   int
	next      uint64 // seq of the next event
	finals    int
	dropped   uint64
	delivered uint64 // highest seq a reader has taken
	reader    bool   // a reader is attached
	closed    bool

	wake chan struct{} // capacity 1: signalled after every append and on Close

	inline [2]Event // the first ring, so a request's stream needs no second allocation
}

func newStream(id uint64, capacity, want int) *Stream {
	if capacity < 1 {
		capacity = 1
	}
	return &Stream{id: id, capacity: capacity, want: want, next: 1, wake: make(chan struct{}, 1)}
}

// ID returns the stream's number within its session (0 is the standalone stream).
func (s *Stream) ID() uint64 { return s.id }

// Send appends a message that is not a final reply (a progress notification,
// a server-to-client request, a log message).
func (s *Stream) Send(msg []byte) { s.append(msg, false) }

// Reply appends the final reply to one of the stream's requests.
func (s *Stream) Reply(msg []byte) { s.append(msg, true) }

func (s *Stream) append(msg []byte, final bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.ring == nil {
		s.ring = s.inline[:min(s.capacity, len(s.inline))]
	}
	if s.n == len(s.ring) {
		if len(s.ring) < s.capacity {
			s.grow()
		} else {
			s.head = (s.head + 1) % len(s.ring)
			s.n--
			s.dropped++
		}
	}
	s.ring[(s.head+s.n)%len(s.ring)] = Event{Seq: s.next, Data: msg, Final: final}
	s.n++
	s.next++
	if final {
		s.finals++
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) grow() {
	size := min(len(s.ring)*2, s.capacity)
	ring := make([]Event, size)
	for i := 0; i < s.n; i++ {
		ring[i] = s.ring[(s.head+i)%len(s.ring)]
	}
	s.ring, s.head = ring, 0
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Wake returns a channel that receives after events were appended or the
// stream was closed. It has room for one signal, so a reader that checks Next
// after each receive never misses an event.
func (s *Stream) Wake() <-chan struct{} { return s.wake }

// Next appends to dst the events after seq `after` and returns them. done
// reports that every request of the stream has its final reply among the
// events returned so far (always false for the standalone stream) or that the
// stream was closed. It returns ErrLost if events after `after` were dropped.
func (s *Stream) Next(dst []Event, after uint64) (evs []Event, done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldest := s.next - uint64(s.n)
	if after+1 < oldest {
		return dst, false, ErrLost
	}
	for i := 0; i < s.n; i++ {
		ev := s.ring[(s.head+i)%len(s.ring)]
		if ev.Seq > after {
			dst = append(dst, ev)
		}
	}
	last := after
	if len(dst) > 0 {
		last = dst[len(dst)-1].Seq
	}
	if last > s.delivered {
		s.delivered = last
	}
	complete := s.want > 0 && s.finals >= s.want && last+1 == s.next
	return dst, complete || s.closed, nil
}

// Complete reports whether every request of the stream has its final reply.
func (s *Stream) Complete() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.want > 0 && s.finals >= s.want
}

// Undelivered returns the seq after which no reader has taken events: a new
// reader of the standalone stream starts there, so messages queued while no
// GET stream was open are not lost.
func (s *Stream) Undelivered() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered
}

// Attach marks a reader as attached; it returns false if one already is.
func (s *Stream) Attach() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reader || s.closed {
		return false
	}
	s.reader = true
	return true
}

// Attached reports whether a reader is attached.
func (s *Stream) Attached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reader
}

// Detach marks the reader gone.
func (s *Stream) Detach() {
	s.mu.Lock()
	s.reader = false
	s.mu.Unlock()
}

// Dropped returns how many events the bounded buffer dropped.
func (s *Stream) Dropped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Close ends the stream: later appends are ignored and readers are woken.
func (s *Stream) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

// EventID returns the SSE event id of event seq on stream: both numbers, so a
// Last-Event-ID names the stream to resume and the place in it.
func EventID(stream, seq uint64) string {
	return strconv.FormatUint(stream, 10) + "-" + strconv.FormatUint(seq, 10)
}

// AppendEventID appends EventID(stream, seq) to dst without allocating.
func AppendEventID(dst []byte, stream, seq uint64) []byte {
	dst = strconv.AppendUint(dst, stream, 10)
	dst = append(dst, '-')
	return strconv.AppendUint(dst, seq, 10)
}

// ParseEventID is the inverse of EventID.
func ParseEventID(id string) (stream, seq uint64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	stream, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return stream, seq, err1 == nil && err2 == nil
}
