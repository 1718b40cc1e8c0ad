package aggregate

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file keeps the endpoint's merged lists (views, see view.go), built
// once and shared by every session that would build the same one.
//
// A view is a pure function of its inputs: the kind, the lists of the
// members visible to a session (interned by content, see shared.go), and
// which of their items the session's principal may use under the
// members' policies. The key names exactly those (each member by its
// index and slot generation, and the size of the session's member table),
// so sessions with the same key share one view, and a view never goes
// stale: a change makes a new key. Building one is singleflight: sessions
// asking for a view being built wait for it. SetMembers empties the
// cache: the keys made with the old members are nobody's any longer.
//
// The cache is bounded in bytes by Options.MaxListBytes: past the bound,
// the least recently used views are evicted (and built again if asked for
// again); a single view larger than the bound is refused with an error
// naming the config key, and the list requests that need it get that
// error. Sessions do not keep views: they look them up for each request,
// so an evicted view is freed.

// viewCache is the endpoint's views by key.
type viewCache struct {
	max    int64
	builds atomic.Int64 // views built (tests count them)

	mu sync.Mutex
	// guarded by mu:
	size    int64 // bytes of the views kept
	entries map[string]*viewEntry
	lru     list.List // of *viewEntry, most recently used first; built ones only
}

// viewEntry is one view, built or being built.
type viewEntry struct {
	key   string
	ready chan struct{} // closed once v or err is set
	v     *view
	err   error
	elem  *list.Element // in lru once built; nil after eviction
}

// get returns the view of key, built by build if no one has it.
func (vc *viewCache) get(key string, build func() (*view, error)) (*view, error) {
	vc.mu.Lock()
	if en, ok := vc.entries[key]; ok {
		if en.elem != nil {
			vc.lru.MoveToFront(en.elem)
		}
		vc.mu.Unlock()
		<-en.ready // a build is CPU only, bounded by the lists' size
		return en.v, en.err
	}
	en := &viewEntry{key: key, ready: make(chan struct{})}
	if vc.entries == nil {
		vc.entries = map[string]*viewEntry{}
	}
	vc.entries[key] = en
	vc.mu.Unlock()

	vc.builds.Add(1)
	v, err := build()
	if err == nil && v.size > vc.max {
		v, err = nil, errTooBig{v.size}
	}

	vc.mu.Lock()
	en.v, en.err = v, err
	if vc.entries[key] == en {
		en.elem = vc.lru.PushFront(en)
		vc.size += en.bytes()
		vc.evictLocked()
	}
	vc.mu.Unlock()
	close(en.ready)
	return v, err
}

// bytes is what an entry counts against the bound: a refusal keeps its
// key only.
func (en *viewEntry) bytes() int64 {
	if en.v == nil {
		return int64(len(en.key)) + 64
	}
	return en.v.size
}

// evictLocked drops the least recently used views until the cache is
// within its bound. Called with vc.mu held.
func (vc *viewCache) evictLocked() {
	for vc.size > vc.max {
		last := vc.lru.Back()
		if last == nil {
			return
		}
		en := last.Value.(*viewEntry)
		vc.lru.Remove(last)
		en.elem = nil
		delete(vc.entries, en.key)
		vc.size -= en.bytes()
	}
}

// clear drops every view: SetMembers changed the members, and the views
// made for the old ones are nobody's now (their keys name members removed
// or replaced, or a smaller table). A build under way finishes for the
// sessions waiting for it but is not kept.
func (vc *viewCache) clear() {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	for _, en := range vc.entries {
		en.elem = nil
	}
	vc.entries = nil
	vc.lru.Init()
	vc.size = 0
}

// stats returns the views kept and their bytes (for tests).
func (vc *viewCache) stats() (views int, size int64) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	return vc.lru.Len(), vc.size
}

// errTooBig is a merged list larger than MaxListBytes.
type errTooBig struct{ size int64 }

func (e errTooBig) Error() string {
	return "the merged list is about " + strconv.FormatInt(e.size, 10) + " bytes"
}

// tooBig is the error a client gets for a list (or a member's list) over
// the endpoint's bound: it names the config key.
func (e *Endpoint) tooBig(what string, size int64) error {
	return errorf(protocol.CodeServerError,
		"%s is about %d bytes, over gateway.endpoints.%s.maxListBytes (%d): raise it, or filter the servers' lists",
		what, size, e.opts.Name, e.opts.MaxListBytes)
}

// viewKeyLocked returns the key of the view of kind k this session has:
// the size of its table of members (the view's positions per member, which
// cursors name), then per member that contributes (visible, with the
// capability, its list loaded), its index and generation (the member
// itself: its prefix and filters; a member replaced at its index has a
// new one), its list and its policy's say on it. Cached per session epoch
// (every change of a member's list or visibility, and every change of the
// session's members, bumps it). Called with c.mu held.
func (c *clientSession) viewKeyLocked(k kind) string {
	if c.keyEpoch[k] == c.epoch && c.viewKeys[k] != "" {
		return c.viewKeys[k]
	}
	b := []byte{byte('0' + k), '/'}
	b = strconv.AppendInt(b, int64(len(c.members)), 10)
	for i, mc := range c.members {
		l := c.listedLocked(i, k)
		if l == nil {
			continue
		}
		b = strconv.AppendInt(append(b, ' '), int64(i), 10)
		b = strconv.AppendUint(append(b, ':'), mc.gen, 10)
		b = strconv.AppendUint(append(b, ':'), l.id, 10)
		if mc.seen.Policy != nil {
			b = append(append(b, ':'), c.policyKeyLocked(mc, k, l)...)
		}
	}
	c.viewKeys[k], c.keyEpoch[k] = string(b), c.epoch
	return c.viewKeys[k]
}

// viewLocked returns the view of kind k for this session: the endpoint's
// shared one, built if no session had it. The view is built from the
// members as the session's table has them (mc.seen), exactly what its key
// names, even while a SetMembers is telling the sessions of a change.
// Called with c.mu held (a build takes no lock of a session).
func (c *clientSession) viewLocked(k kind) (*view, error) {
	key := c.viewKeyLocked(k)
	v, err := c.e.views.get(key, func() (*view, error) {
		lists := make([]*memberList, len(c.members))
		members := make([]*Member, len(c.members))
		for i, mc := range c.members {
			lists[i], members[i] = c.listedLocked(i, k), mc.seen
		}
		allowed := func(i int, k kind, key string) bool {
			return c.e.admits(members[i], c.who(), k, key)
		}
		return c.e.buildView(k, lists, members, allowed), nil
	})
	if big := (errTooBig{}); errors.As(err, &big) {
		return nil, c.e.tooBig("the merged "+kindInfo[k].method+" of endpoint "+strconv.Quote(c.e.opts.Name), big.size)
	}
	return v, err
}

// policyKeyLocked returns what member mc's policy lets this session's
// principal list of l: "*" for everything, else a digest of its decision
// on each item. Sessions whose principals get the same decisions share
// the view, whoever they are. Cached per list and policy (a change of
// policy alone keeps the list). Called with c.mu held.
func (c *clientSession) policyKeyLocked(mc *member, k kind, l *memberList) string {
	pk := &mc.policy[k]
	if pk.id == l.id && pk.of == mc.seen && pk.key != "" {
		return pk.key
	}
	pol := mc.seen.Policy
	who := c.who()
	key := "*"
	if !pol.AllowsAll(who, policyKind(k)) {
		bits := make([]byte, (len(l.items)+7)/8)
		for j, it := range l.items {
			if pol.Allows(who, policyKind(k), it.key, nil) {
				bits[j/8] |= 1 << (j % 8)
			}
		}
		sum := sha256.Sum256(bits)
		key = hex.EncodeToString(sum[:16])
	}
	pk.id, pk.of, pk.key = l.id, mc.seen, key
	return key
}

// policyKey is a member policy's say on one list of a session.
type policyKey struct {
	id  uint64  // the list's
	of  *Member // whose Policy it is
	key string
}
