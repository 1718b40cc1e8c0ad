package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// A session knows each member's lists whole (every page, following the
// member's cursors), loaded when first needed and again after the member
// announces a change or comes back: the names of every member must be
// known to route a call and to find collisions. The lists themselves are
// the endpoint's, shared by every session that has the same (shared.go),
// and so are the merged lists made of them (viewcache.go): a session holds
// pointers. A client's tools/list (prompts, resources, templates) is
// answered with the whole merged list in one page, members in config
// order and each member's items in its own order, since many clients read
// only the first page; with Options.PageSize, pages of that many items,
// and a cursor of the endpoint's own (cursor.go).

// maxPages bounds the pages of one member's list: a member handing out
// cursors forever must not hold a session's list forever.
const maxPages = 1000

// listState is what a session knows of one member's list of one kind.
type listState struct {
	gen     uint64        // bumped by reset: a load begun before is stale
	list    *memberList   // the whole list, once loaded (shared: read only)
	loaded  bool          // list is the member's for gen
	loading chan struct{} // closed when the load under way ends; nil if none
	err     error         // why the last load failed
}

// reset forgets a list that changed. A load under way finishes on its own
// and is ignored.
func (ls *listState) reset() {
	ls.gen++
	ls.list, ls.loaded, ls.loading, ls.err = nil, false, nil, nil
}

// caps are the capabilities of a member that the endpoint merges.
type caps uint8

const (
	capTools caps = 1 << iota
	capPrompts
	capResources
	capSubscribe
	capLogging
	capCompletions
)

// has reports whether a member with c has lists of kind k.
func (c caps) has(k kind) bool {
	switch k {
	case kindTools:
		return c&capTools != 0
	case kindPrompts:
		return c&capPrompts != 0
	}
	return c&capResources != 0
}

// kinds returns the lists a member with c contributes to.
func (c caps) kinds() kindSet {
	var s kindSet
	for k := range numKinds {
		if c.has(k) {
			s |= 1 << k
		}
	}
	return s
}

// parseCaps reads the capabilities of an initialize result.
func parseCaps(result []byte) caps {
	var r struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(result, &r)
	var c caps
	for key, v := range r.Capabilities {
		if string(v) == "null" {
			continue
		}
		switch key {
		case "tools":
			c |= capTools
		case "prompts":
			c |= capPrompts
		case "resources":
			c |= capResources
			var res struct {
				Subscribe bool `json:"subscribe"`
			}
			if json.Unmarshal(v, &res) == nil && res.Subscribe {
				c |= capSubscribe
			}
		case "logging":
			c |= capLogging
		case "completions":
			c |= capCompletions
		}
	}
	return c
}

// ensureRounds bounds how many times ensure loads a list that changed
// while it was loading: a member announcing changes without end must not
// hold a list request forever.
const ensureRounds = 3

// ensure loads the lists of kinds of every visible member that has them
// and has not loaded them, and waits for the loads (each bounded by its
// member's timeout) or ctx. A list that changed while it loaded is loaded
// again (up to ensureRounds times), so that a client listing after a
// list_changed is not answered without that member.
func (c *clientSession) ensure(ctx context.Context, kinds ...kind) {
	for round := range ensureRounds {
		var waits []chan struct{}
		c.mu.Lock()
		for _, k := range kinds {
			for i, mc := range c.members {
				ls := &mc.lists[k]
				// A list that failed is tried again by the next request,
				// not again by this one.
				if c.closed || !c.visibleLocked(i) || !mc.caps.has(k) || ls.loaded || round > 0 && ls.err != nil {
					continue
				}
				waits = append(waits, c.loadingLocked(mc, k))
			}
		}
		c.mu.Unlock()
		if len(waits) == 0 {
			return
		}
		for _, w := range waits {
			select {
			case <-w:
			case <-ctx.Done():
				return
			}
		}
	}
}

// completeLocked reports whether every visible member's list of kind k is
// known: loaded, or failed to load (the member is left out until a list
// loads it again; a name of its own says why it cannot be routed), so that
// a member whose list hangs delays the calls to the others once, by its
// timeout, and not every call again while it hangs (found by the fault
// tests). Called with c.mu held.
func (c *clientSession) completeLocked(k kind) bool {
	for i, mc := range c.members {
		if c.visibleLocked(i) && mc.caps.has(k) && !mc.lists[k].loaded && mc.lists[k].err == nil {
			return false
		}
	}
	return true
}

// loadingLocked returns the channel closed when the load of member mc's
// list of kind k ends, starting one if none is under way. Called with
// c.mu held.
func (c *clientSession) loadingLocked(mc *member, k kind) chan struct{} {
	ls := &mc.lists[k]
	if ls.loading == nil {
		ls.loading = make(chan struct{})
		go c.load(mc, k, ls.gen, ls.loading)
	}
	return ls.loading
}

// load fetches member mc's whole list of kind k, for generation gen.
func (c *clientSession) load(mc *member, k kind, gen uint64, done chan struct{}) {
	defer close(done)
	ctx, cancel := c.memberCtxOf(c.ctx, mc)
	defer cancel()
	var list *memberList
	var err error
	if mc.m.SharedLists && !mc.apart {
		list, err = c.sharedList(ctx, mc, k)
	} else {
		list, err = c.fetchAll(ctx, mc, k)
	}
	c.mu.Lock()
	ls := &mc.lists[k]
	if ls.loading == done {
		ls.loading = nil
	}
	if ls.gen == gen {
		if err == nil {
			ls.list, ls.loaded, ls.err = list, true, nil
			c.epoch++
		} else {
			ls.err = err
		}
	}
	closed := c.closed
	c.mu.Unlock()
	if err != nil && !closed {
		if ok, n := c.e.slotAt(mc.i).leftOut.allow(); ok {
			c.e.log.Warn("member left out of a merged list", "server", mc.m.Name, "list", kindInfo[k].method, "err", err, "suppressed", n)
		}
	}
}

// fetchAll fetches every page of member mc's list of kind k, kept once
// per content by the endpoint. A list over MaxListBytes (its items and
// the cursors it took to fetch them) is refused. It asks mc itself, not
// whoever holds its index now: a load of a member renewed meanwhile must
// not keep the new one's list as the old one's.
func (c *clientSession) fetchAll(ctx context.Context, mc *member, k kind) (*memberList, error) {
	var pages []page
	var size int64
	seen := map[string]bool{"": true}
	cursor := ""
	for {
		if len(pages) == maxPages {
			return nil, fmt.Errorf("server %q: %s has more than %d pages", mc.m.Name, kindInfo[k].method, maxPages)
		}
		p, err := c.fetchPage(ctx, mc, k, cursor)
		if err != nil {
			return nil, err
		}
		pages = append(pages, p)
		// The cursors count too: each is kept (seen, and the page's) until
		// the list is whole, and a member may hand out big ones with
		// pages of nothing.
		size += int64(len(p.next))
		for _, it := range p.items {
			size += int64(len(it.raw))
		}
		if size > c.e.opts.MaxListBytes {
			return nil, overBound{c.e.tooBig(fmt.Sprintf("the %s of server %q", kindInfo[k].method, mc.m.Name), size)}
		}
		if p.next == "" {
			return c.e.lists.intern(pages), nil
		}
		if seen[p.next] {
			return nil, fmt.Errorf("server %q: %s gave cursor %q twice", mc.m.Name, kindInfo[k].method, p.next)
		}
		seen[p.next] = true
		cursor = p.next
	}
}

// fetchPage fetches member mc's page of kind k at cursor.
func (c *clientSession) fetchPage(ctx context.Context, mc *member, k kind, cursor string) (page, error) {
	var params []byte
	if cursor != "" {
		params = append(append([]byte(`{"cursor":`), quote(cursor)...), '}')
	}
	result, err := c.callMember(ctx, mc, kindInfo[k].method, params)
	if err != nil {
		return page{}, err
	}
	p, err := parsePage(k, cursor, result)
	if err != nil {
		return page{}, fmt.Errorf("server %q: %w", mc.m.Name, err)
	}
	return p, nil
}

// listedLocked returns member i's list of kind k when it is visible and
// loaded, else nil. Called with c.mu held.
func (c *clientSession) listedLocked(i int, k kind) *memberList {
	mc := c.members[i]
	if !c.visibleLocked(i) || !mc.caps.has(k) || !mc.lists[k].loaded {
		return nil
	}
	return mc.lists[k].list
}

// list answers a client's tools/list, prompts/list, resources/list or
// resources/templates/list: the whole merged list, or with PageSize the
// page at its cursor.
func (c *clientSession) list(ctx context.Context, p *pending, k kind, cursor string, hasCursor bool) {
	member, offset := 0, 0
	if hasCursor {
		var err error
		if member, offset, err = decodeCursor(cursor, c.memberCount()); err != nil {
			c.fail(p, errorf(protocol.CodeInvalidParams, "invalid cursor %q: not one this endpoint gave", clip(cursor)))
			return
		}
	}
	c.ensure(ctx, k)
	if ctx.Err() != nil {
		return // answered: cancelled, abandoned or closed
	}
	c.mu.Lock()
	err := c.overBoundLocked(k)
	var v *view
	if err == nil {
		v, err = c.viewLocked(k)
	}
	c.mu.Unlock()
	if err != nil {
		c.fail(p, err)
		return
	}
	n := v.count()
	// A member's offset past its items (its list shrank since the
	// cursor was given) starts at the next member.
	from := min(v.first[member]+offset, v.first[member+1])
	to := n
	if size := c.e.opts.PageSize; size > 0 {
		to = min(from+size, n)
	}
	if from == 0 && to == n {
		c.answer(p, v.whole)
		return
	}
	next := ""
	if to < n {
		next = encodeCursor(v.at(to))
	}
	c.answer(p, v.page(from, to, next))
}

// overBound is a member's list refused for MaxListBytes.
type overBound struct{ error }

func (o overBound) Unwrap() error { return o.error }

// overBoundLocked returns the error of a visible member's list of kind k
// refused for MaxListBytes, if any: the merged list is refused with it,
// never answered without that member's items. Called with c.mu held.
func (c *clientSession) overBoundLocked(k kind) error {
	for i, mc := range c.members {
		var ob overBound
		if c.visibleLocked(i) && mc.caps.has(k) && !mc.lists[k].loaded && errors.As(mc.lists[k].err, &ob) {
			return ob.error
		}
	}
	return nil
}

// clip shortens a client's value quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
