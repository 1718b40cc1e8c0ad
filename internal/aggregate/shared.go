package aggregate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"sync"
	"weak"
)

// This file keeps the members' lists once for the whole endpoint, however
// many sessions it has: a member of 20,000 tools costs its list once, not
// once per session.
//
// A list as fetched is a memberList: immutable, and interned by its
// content (the items' bytes and the caching hints), so that every session
// holding the same list holds one copy. Sessions point at it; when none
// does any longer it is collected and its entry in the table goes with it
// (a weak pointer and a cleanup, so that no session has to say it let go).
//
// A member with SharedLists (one process serves every session: a shared
// stdio server) is also fetched once: the first session to need its list
// fetches it through its own member session and the others wait for that
// fetch (singleflight), then all use the list until it is invalidated: by
// the member's list_changed (each session hears it and invalidates; the
// first invalidation of a list known or being fetched counts, the others
// find nothing to drop), by the member becoming ready again after being
// down, or by the endpoint's last session ending (nobody is left to hear
// a change). A fetch under way when its list is invalidated still answers the
// sessions that waited for it, but is not kept: the next one to ask
// fetches again, so no list fetched before a change is kept after it.
// A member without SharedLists (session-isolated, remote: its list may
// differ per session) is fetched by each session itself, and only the
// memory is shared, when the contents are the same.

// memberList is one member's whole list of one kind, every page in
// order: immutable once made.
type memberList struct {
	id    uint64 // unique to its content within the endpoint: view keys name it
	items []item
	cache caching // the hints of its pages, folded
	size  int64   // bytes of its items' JSON (what MaxListBytes bounds)
}

// interner is the table of the lists alive, by content.
type interner struct {
	mu sync.Mutex
	// guarded by mu:
	lists  map[[sha256.Size]byte]weak.Pointer[memberList]
	nextID uint64
}

// intern returns the list alive with the same content as pages, or a new
// one made of them.
func (in *interner) intern(pages []page) *memberList {
	h := sha256.New()
	l := &memberList{}
	var n [binary.MaxVarintLen64]byte
	for j := range pages {
		p := &pages[j]
		l.cache = l.cache.merge(p, j == 0)
		for _, it := range p.items {
			h.Write(binary.AppendUvarint(n[:0], uint64(len(it.raw))))
			h.Write(it.raw)
			l.size += int64(len(it.raw))
		}
		l.items = append(l.items, p.items...)
	}
	h.Write(binary.AppendVarint(n[:0], l.cache.ttl))
	h.Write([]byte{b2i(l.cache.known), b2i(l.cache.public)})
	var sum [sha256.Size]byte
	h.Sum(sum[:0])

	in.mu.Lock()
	defer in.mu.Unlock()
	if wp, ok := in.lists[sum]; ok {
		if old := wp.Value(); old != nil {
			return old
		}
	}
	if in.lists == nil {
		in.lists = map[[sha256.Size]byte]weak.Pointer[memberList]{}
	}
	in.nextID++
	l.id = in.nextID
	wp := weak.Make(l)
	in.lists[sum] = wp
	runtime.AddCleanup(l, in.forget, entryRef{sum, wp})
	return l
}

// entryRef names an entry of the table: a later list of the same content
// may have replaced it by the time the cleanup runs.
type entryRef struct {
	sum [sha256.Size]byte
	wp  weak.Pointer[memberList]
}

// forget drops a collected list's entry.
func (in *interner) forget(r entryRef) {
	in.mu.Lock()
	if in.lists[r.sum] == r.wp {
		delete(in.lists, r.sum)
	}
	in.mu.Unlock()
}

// size returns how many lists are alive (for tests).
func (in *interner) size() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.lists)
}

func b2i(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// sharedList is a SharedLists member's list of one kind, for every
// session.
type sharedList struct {
	gen    uint64      // bumped by invalidate: a fetch begun before is not kept
	list   *memberList // nil until fetched for gen
	flight *listFlight // the fetch under way for gen, nil if none
}

// listFlight is one fetch of a shared list, waited for by the sessions
// that need the list meanwhile.
type listFlight struct {
	gen  uint64
	done chan struct{} // closed when list, err and orphaned are set
	list *memberList
	err  error
	// orphaned: the session fetching it closed, which ended the fetch:
	// the sessions that waited fetch again themselves.
	orphaned bool
}

// memberLists is what the endpoint keeps for one member: its shared
// lists, by kind, and a token naming it in the keys of the views.
type memberLists struct {
	token uint64
	kinds [numKinds]sharedList
}

// sharedOf returns member m's lists. Keyed by the member, so that a member
// replaced in the endpoint starts with nothing, and with a token of its
// own: views built with the member it replaced are not its views, even
// at the same index with the same list.
func (e *Endpoint) sharedOf(m *Member) *memberLists {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	s := e.shared[m]
	if s == nil {
		if e.shared == nil {
			e.shared = map[*Member]*memberLists{}
		}
		e.tokens++
		s = &memberLists{token: e.tokens}
		e.shared[m] = s
	}
	return s
}

// invalidate drops member m's shared lists of kinds: they changed. A list
// neither known nor being fetched has nothing to drop (every session of a
// shared member hears each list_changed: the first one counts).
func (e *Endpoint) invalidate(m *Member, kinds kindSet) {
	if !m.SharedLists {
		return
	}
	sl := e.sharedOf(m)
	e.lmu.Lock()
	defer e.lmu.Unlock()
	for k := range numKinds {
		if s := &sl.kinds[k]; kinds.has(k) && (s.list != nil || s.flight != nil) {
			s.gen++
			s.list, s.flight = nil, nil
		}
	}
}

// dropShared invalidates every shared list: no session is left to hear
// that one changed, so none can be trusted by the next session.
func (e *Endpoint) dropShared() {
	e.lmu.Lock()
	members := make([]*Member, 0, len(e.shared))
	for m := range e.shared {
		members = append(members, m)
	}
	e.lmu.Unlock()
	for _, m := range members {
		e.invalidate(m, 1<<numKinds-1)
	}
}

// sharedList returns member mc's list of kind k as every session shares
// it: the one known, the one being fetched, or one fetched now through
// this session's member session (within ctx).
func (c *conn) sharedList(ctx context.Context, mc *member, k kind) (*memberList, error) {
	e := c.e
	s := &e.sharedOf(mc.m).kinds[k]
	for {
		e.lmu.Lock()
		if l := s.list; l != nil {
			e.lmu.Unlock()
			return l, nil
		}
		f := s.flight
		mine := f == nil
		if mine {
			f = &listFlight{gen: s.gen, done: make(chan struct{})}
			s.flight = f
		}
		e.lmu.Unlock()
		if mine {
			list, err := c.fetchAll(ctx, mc.i, k)
			e.lmu.Lock()
			f.list, f.err = list, err
			f.orphaned = err != nil && c.ctx.Err() != nil
			if s.flight == f {
				s.flight = nil
				if err == nil && s.gen == f.gen {
					s.list = list
				}
			}
			e.lmu.Unlock()
			close(f.done)
			return list, err
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, c.ended(ctx, mc.i, kindInfo[k].method)
		}
		if !f.orphaned {
			return f.list, f.err
		}
	}
}
