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
// The lists are kept per member index and slot generation (listsKey): a
// member removed or replaced by SetMembers has its lists dropped, and
// its successor at the index starts with none.
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
// lists, by kind.
type memberLists struct {
	kinds [numKinds]sharedList
}

// listsKey names a member as the shared lists know it: its index and the
// generation of its slot (members.go). SetMembers bumps the generation
// when the member's backend, prefix or filter changes or the member is
// removed, so a member replaced at its index starts with nothing; a
// change of policy alone keeps the lists (the endpoint filters them
// itself). The same pair names the member in the keys of the views.
type listsKey struct {
	i   int
	gen uint64
}

// sharedOf returns the lists of member key. Only a current member's are
// kept: a session not yet told of a SetMembers that replaced or removed
// its member gets lists of its own, kept by nobody, so that an entry
// SetMembers dropped is not made again. Lock order: lmu before mu.
func (e *Endpoint) sharedOf(key listsKey) *memberLists {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	if s := e.shared[key]; s != nil {
		return s
	}
	s := &memberLists{}
	if !e.isCurrent(key) {
		return s
	}
	if e.shared == nil {
		e.shared = map[listsKey]*memberLists{}
	}
	e.shared[key] = s
	return s
}

// isCurrent reports whether key is the member at its index now.
func (e *Endpoint) isCurrent(key listsKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return key.i < len(e.slots) && e.slots[key.i].gen == key.gen && !e.slots[key.i].removed
}

// invalidate drops member key's shared lists of kinds: they changed. A
// list neither known nor being fetched has nothing to drop (every session
// of a shared member hears each list_changed: the first one counts).
func (e *Endpoint) invalidate(key listsKey, kinds kindSet) {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	sl := e.shared[key]
	if sl == nil {
		return
	}
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
	e.pruneShared()
	e.lmu.Lock()
	keys := make([]listsKey, 0, len(e.shared))
	for key := range e.shared {
		keys = append(keys, key)
	}
	e.lmu.Unlock()
	for _, key := range keys {
		e.invalidate(key, 1<<numKinds-1)
	}
}

// pruneShared drops the lists of members that are no longer current
// (removed, or replaced at their index): SetMembers calls it, so that the
// lists kept grow with the endpoint's members, not with its reloads. A
// fetch under way for one still answers the sessions waiting for it.
func (e *Endpoint) pruneShared() {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	for key := range e.shared {
		if !e.isCurrent(key) {
			delete(e.shared, key)
		}
	}
}

// sharedCount returns how many members' lists the endpoint keeps (for
// tests).
func (e *Endpoint) sharedCount() int {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	return len(e.shared)
}

// sharedList returns member mc's list of kind k as every session shares
// it: the one known, the one being fetched, or one fetched now through
// this session's member session (within ctx).
func (c *clientSession) sharedList(ctx context.Context, mc *member, k kind) (*memberList, error) {
	e := c.e
	s := &e.sharedOf(listsKey{mc.i, mc.gen}).kinds[k]
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
			list, err := c.fetchAll(ctx, mc, k)
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
