package session

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrLost is returned by Stream.Next, together with the events still kept,
// when events after the requested one were dropped from the stream's bounded
// buffer: the reader has a gap (progress or log messages, or replies it had
// already taken), but still gets every final reply it has not taken.
var ErrLost = errors.New("session: events were dropped from the stream buffer")

// eventOverhead is what one kept event costs besides its data, so that a
// flood of empty messages is bounded by bytes too.
const eventOverhead = 64

// Event is one message on a stream.
type Event struct {
	Seq   uint64 // 1, 2, ... within its stream
	Data  []byte // one JSON-RPC message; never modified after Append
	Final bool   // the reply to one of the stream's requests
}

func (ev *Event) size() int64 { return int64(len(ev.Data)) + eventOverhead }

// queue is a FIFO of events ordered by Seq.
type queue struct {
	evs  []Event
	head int
}

func (q *queue) len() int { return len(q.evs) - q.head }

func (q *queue) push(ev Event) { q.evs = append(q.evs, ev) }

func (q *queue) front() *Event {
	if q.head == len(q.evs) {
		return nil
	}
	return &q.evs[q.head]
}

func (q *queue) pop() Event {
	ev := q.evs[q.head]
	q.evs[q.head] = Event{} // release the data
	q.head++
	if q.head == len(q.evs) {
		q.evs, q.head = q.evs[:0], 0
	} else if q.head > 32 && q.head*2 > len(q.evs) {
		n := copy(q.evs, q.evs[q.head:])
		clear(q.evs[n:])
		q.evs, q.head = q.evs[:n], 0
	}
	return ev
}

// after returns the index of the first event with Seq > seq.
func (q *queue) after(seq uint64) int {
	return q.head + sort.Search(q.len(), func(i int) bool { return q.evs[q.head+i].Seq > seq })
}

// Stream is the event log of one SSE stream (or JSON reply) of a session: the
// stream of a POST that carried requests, or the session's standalone stream.
//
// Appending never blocks. The log is bounded by an event count and by bytes;
// over either bound it drops the oldest non-final event first, counting the
// drop. Final replies are kept apart and never dropped from a POST stream
// (they are bounded by its request count); the standalone stream (which
// carries legacy sessions' replies) drops only finals a reader already took.
// Readers take events with Next and wait on Wake.
type Stream struct {
	// Static after construction.
	id       uint64
	keep     int   // events kept: > 0 a count bound; < 0 none once delivered
	maxBytes int64 // bytes kept
	want     int   // finals that complete the stream; 0 for the standalone stream

	mu sync.Mutex
	// guarded by mu:
	events    queue // non-final events
	finals    queue // final replies
	bytes     int64 // size of the kept events
	next      uint64
	nfinals   int
	expect    int           // requests whose replies come on the standalone stream (legacy)
	dropped   uint64        // events dropped by the bounds
	lostMax   uint64        // highest seq no longer kept (0: none)
	delivered uint64        // highest seq a reader has taken
	reader    bool          // a reader is attached
	free      chan struct{} // made by AttachWait when it must wait; signalled by Detach
	closed    bool
	owner     *Session                      // charged for bytes; nil once the session let the stream go
	mirror    func(ev Event, complete bool) // Mirror's; called under mu (replicas.go)

	wake chan struct{} // capacity 1: signalled after every append and on Close

	inline [1]Event // the first finals slot, so a request's stream needs no second allocation
}

func newStream(id uint64, keep int, maxBytes int64, want int) *Stream {
	s := &Stream{id: id, keep: keep, maxBytes: maxBytes, want: want, next: 1, wake: make(chan struct{}, 1)}
	s.finals.evs = s.inline[:0]
	return s
}

// ID returns the stream's number within its session (0 is the standalone stream).
func (s *Stream) ID() uint64 { return s.id }

// Send appends a message that is not a final reply (a progress notification,
// a server-to-client request, a log message).
func (s *Stream) Send(msg []byte) { s.append(msg, false) }

// Reply appends the final reply to one of the stream's requests. A nil msg
// ends a request without a message (the client cancelled it).
func (s *Stream) Reply(msg []byte) { s.append(msg, true) }

func (s *Stream) append(msg []byte, final bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	ev := Event{Seq: s.next, Data: msg, Final: final}
	s.next++
	if final {
		s.finals.push(ev)
		s.nfinals++
	} else {
		s.events.push(ev)
	}
	if s.mirror != nil {
		s.mirror(ev, s.want > 0 && s.nfinals >= s.want)
	}
	s.charge(ev.size())
	s.trimLocked()
	owner := s.owner
	s.mu.Unlock()
	s.signal()
	if owner != nil {
		owner.trim()
	}
}

// charge adds d to the bytes kept, and to the owning session's total.
func (s *Stream) charge(d int64) {
	s.bytes += d
	if s.owner != nil {
		s.owner.bytes.Add(d)
	}
}

func (s *Stream) overLocked() bool {
	return s.bytes > s.maxBytes || s.keep > 0 && s.events.len()+s.finals.len() > s.keep
}

// trimLocked drops events until the stream is within its bounds, or only
// finals it must keep are left.
func (s *Stream) trimLocked() {
	for s.overLocked() {
		var ev Event
		switch f := s.finals.front(); {
		case s.events.len() > 0:
			ev = s.events.pop()
		case s.want == 0 && f != nil && f.Seq <= s.delivered:
			ev = s.finals.pop()
		default:
			return
		}
		s.dropped++
		s.forgetLocked(ev)
	}
}

func (s *Stream) forgetLocked(ev Event) {
	s.charge(-ev.size())
	s.lostMax = max(s.lostMax, ev.Seq)
}

// releaseDeliveredLocked drops what a reader took when the stream keeps no
// events for replay.
func (s *Stream) releaseDeliveredLocked() {
	for _, q := range [...]*queue{&s.events, &s.finals} {
		for f := q.front(); f != nil && f.Seq <= s.delivered; f = q.front() {
			s.forgetLocked(q.pop())
		}
	}
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

// Next appends to dst the kept events after seq `after`, in order, and
// returns them. done reports that every request of the stream has its final
// reply among the events returned so far (always false for the standalone
// stream) or that the stream was closed. err is ErrLost when events after
// `after` are no longer kept: the events returned are still valid, and
// include every final reply not yet taken.
func (s *Stream) Next(dst []Event, after uint64) (evs []Event, done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lostMax > after {
		err = ErrLost
	}
	i, j := s.events.after(after), s.finals.after(after)
	for i < len(s.events.evs) || j < len(s.finals.evs) {
		if j == len(s.finals.evs) || i < len(s.events.evs) && s.events.evs[i].Seq < s.finals.evs[j].Seq {
			dst = append(dst, s.events.evs[i])
			i++
		} else {
			dst = append(dst, s.finals.evs[j])
			j++
		}
	}
	if n := len(dst); n > 0 && dst[n-1].Seq > s.delivered {
		s.delivered = dst[n-1].Seq
	}
	if s.keep < 0 {
		s.releaseDeliveredLocked()
	}
	complete := s.want > 0 && s.nfinals >= s.want
	return dst, complete || s.closed, err
}

// Complete reports whether every request of the stream has its final reply.
func (s *Stream) Complete() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.want > 0 && s.nfinals >= s.want
}

// Closed reports whether the stream was closed (its session ended).
func (s *Stream) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Expect records n more requests whose final replies will come on this
// stream although it is not theirs alone (a legacy session's standalone
// stream); Settled reports whether they all came.
func (s *Stream) Expect(n int) {
	s.mu.Lock()
	s.expect += n
	if s.owner != nil {
		s.owner.reqs.Add(uint64(n))
	}
	s.mu.Unlock()
}

// Settled reports whether every request announced with Expect has its final
// reply.
func (s *Stream) Settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nfinals >= s.expect
}

// Undelivered returns the seq after which a new reader of the standalone
// stream starts: after what readers took, so messages queued while no GET
// stream was open are not lost, but never before the oldest event still
// kept, so a stream that overflowed before its first reader can be opened.
func (s *Stream) Undelivered() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldest := s.next
	if f := s.events.front(); f != nil {
		oldest = f.Seq
	}
	if f := s.finals.front(); f != nil && f.Seq < oldest {
		oldest = f.Seq
	}
	return max(s.delivered, oldest-1)
}

// Issued reports whether seq names an event the stream has had, or its
// start (0): an event id of a later seq was never sent, so a resumption
// from it would skip every event up to it, final replies included.
func (s *Stream) Issued(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seq < s.next
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

// AttachWait is Attach that waits, at most d or until ctx ends, for the
// attached reader to detach. A client resuming a stream right after its
// connection broke may come back before the server noticed the break, while
// the old reader is still attached.
func (s *Stream) AttachWait(ctx context.Context, d time.Duration) bool {
	var t *time.Timer
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return false
		}
		if !s.reader {
			s.reader = true
			s.mu.Unlock()
			return true
		}
		if s.free == nil {
			s.free = make(chan struct{}, 1)
		}
		free := s.free
		s.mu.Unlock()
		if t == nil {
			t = time.NewTimer(d)
			defer t.Stop()
		}
		select {
		case <-free:
		case <-t.C:
			return s.Attach() // a signal taken by a waiter that gave up
		case <-ctx.Done():
			return false
		}
	}
}

// Attached reports whether a reader is attached.
func (s *Stream) Attached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reader
}

// Detach marks the reader gone. A finished stream without a reader may then
// be evicted by its session's byte bound.
func (s *Stream) Detach() {
	s.mu.Lock()
	s.reader = false
	owner := s.owner
	if s.free != nil {
		select {
		case s.free <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
	if owner != nil {
		owner.trim()
	}
}

// Backlogged reports whether the stream keeps more than its byte bound:
// only final replies no reader has taken can keep it there (everything else
// is dropped first), so its reader is gone or not reading. The HTTP front
// refuses new requests whose replies would come on such a stream (a legacy
// session's) rather than hold them without bound.
func (s *Stream) Backlogged() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes > s.maxBytes
}

// Dropped returns how many events the stream's bounds dropped.
func (s *Stream) Dropped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Bytes returns the bytes the stream keeps (data plus a fixed cost per event).
func (s *Stream) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Close ends the stream: later appends are ignored and readers are woken.
// Events already appended stay readable.
func (s *Stream) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

// disown stops charging the stream's bytes to its session (the session no
// longer holds the stream) and returns them. With release, the stream's
// events are also let go (it is closed) unless a reader is attached; evicted
// reports whether they were.
func (s *Stream) disown(release bool) (n int64, evicted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disownLocked(release && !s.reader)
}

func (s *Stream) disownLocked(release bool) (int64, bool) {
	n := s.bytes
	s.owner = nil
	if release {
		s.closed = true
		s.events, s.finals = queue{}, queue{}
		s.bytes = 0
		s.lostMax = s.next - 1
	}
	return n, release
}

// evict lets the stream go to keep its session in its byte bound, if it is
// finished and nobody is reading it, and returns the bytes it kept. The
// check and the release are one step: a reader attaching in between would
// find a closed, empty stream.
func (s *Stream) evict() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reader || s.want == 0 || s.nfinals < s.want {
		return 0, false
	}
	return s.disownLocked(true)
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
