package session

// This file is what a session's streams need when several replicas serve
// the session (a portable one: any replica may take its next request):
// stream numbers that tell the replicas' streams apart, a mirror of a
// stream's events into the store the replicas share, and what that store
// gives back to a replica that did not write the stream.

// NumberStreamsFrom makes the session's next POST streams number base+1,
// base+2, ...: each replica numbers the streams of a session it serves
// from a base of its own, so that a Last-Event-ID names one replica's
// stream whichever replica reads it. Call it before the session's first
// NewStream; a base below the streams already numbered is ignored.
func (s *Session) NumberStreamsFrom(base uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nextStream < base {
		s.nextStream = base
	}
}

// Mirror calls fn with every event of the stream after seq `after`, in
// order: at once with those kept now, then with each one as it is
// appended, complete telling whether the stream then has every final reply
// it waits for. A stream has one mirror: Mirror again returns false and
// changes nothing.
//
// fn runs with the stream's lock held, so that it sees the events in the
// order they were appended: it must not block (a bounded queue's TrySend)
// nor call the stream. Events that the stream's bounds dropped before
// Mirror are not seen.
func (s *Stream) Mirror(after uint64, fn func(ev Event, complete bool)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mirror != nil {
		return false
	}
	complete := s.want > 0 && s.nfinals >= s.want
	i, j := s.events.after(after), s.finals.after(after)
	for i < len(s.events.evs) || j < len(s.finals.evs) {
		if j == len(s.finals.evs) || i < len(s.events.evs) && s.events.evs[i].Seq < s.finals.evs[j].Seq {
			fn(s.events.evs[i], complete)
			i++
		} else {
			fn(s.finals.evs[j], complete)
			j++
		}
	}
	s.mirror = fn
	return true
}

// Record is what the replicas' shared store keeps of one stream, as a
// replica that did not write it reads it back: who wrote it, the ids of
// its requests, which of them got a final reply, and the events after the
// seq asked for.
type Record struct {
	Instance  string   // the replica that wrote the stream
	Advertise string   // where that replica is reached
	Requests  [][]byte // the ids of the stream's requests, byte for byte
	Finals    []Final  // the final replies written, in any order
	After     uint64   // the seq the events follow
	Events    []Event  // the events after After that the store kept, in order
}

// Final is one final reply of a Record's stream: its seq and the id it
// answers (nil for a request that ended without a message: its client
// cancelled it).
type Final struct {
	Seq uint64
	ID  []byte
}

// Unanswered returns the ids of the requests of r's stream whose client,
// resuming after r.After, gets no final reply from r.Events: none was
// written, or the one written after r.After is no longer kept. Each of
// them is owed exactly one answer. A request that ended without a message
// (its client cancelled it) is owed none, but its id is unknown: when
// such finals account for every request without an identified reply,
// none is returned; otherwise all of those requests are, a cancelled one
// among them getting an answer its client ignores rather than another
// request getting none (as the front does for a batch whose stream
// closed).
func (r *Record) Unanswered() [][]byte {
	kept := make(map[uint64]bool, len(r.Events))
	for _, ev := range r.Events {
		if ev.Final {
			kept[ev.Seq] = true
		}
	}
	got := map[string]bool{}
	anon := 0
	for _, f := range r.Finals {
		switch {
		case f.ID == nil:
			anon++
		case f.Seq <= r.After || kept[f.Seq]:
			got[string(f.ID)] = true
		}
	}
	var out [][]byte
	for _, id := range r.Requests {
		if !got[string(id)] {
			out = append(out, id)
		}
	}
	if anon >= len(out) {
		return nil
	}
	return out
}
