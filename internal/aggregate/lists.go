package aggregate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// A session knows each member's lists as pages, loaded whole (every page,
// following the member's cursors) when first needed and again after the
// member announces a change or comes back: the names of every member must
// be known to route a call and to find collisions. A client's page of a
// merged list is one page of one member (its items filtered and renamed);
// its cursor names the member and the member's own cursor, so the client
// follows every member's pagination, in config order, and the endpoint
// serves it from what it loaded.

// maxPages bounds the pages of one member's list: a member handing out
// cursors forever must not hold a session's list forever.
const maxPages = 1000

// listState is what a session knows of one member's list of one kind.
type listState struct {
	gen     uint64        // bumped by reset: a load begun before is stale
	pages   []page        // every page, once loaded
	loaded  bool          // pages is complete for gen
	loading chan struct{} // closed when the load under way ends; nil if none
	err     error         // why the last load failed
}

// reset forgets a list that changed. A load under way finishes on its own
// and is ignored.
func (ls *listState) reset() {
	ls.gen++
	ls.pages, ls.loaded, ls.loading, ls.err = nil, false, nil, nil
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

// ensure loads the lists of kinds of every visible member that has them
// and has not loaded them, and waits for the loads (each bounded by its
// member's timeout) or ctx.
func (c *conn) ensure(ctx context.Context, kinds ...kind) {
	var waits []chan struct{}
	c.mu.Lock()
	for _, k := range kinds {
		for i, mc := range c.members {
			if c.closed || !c.visibleLocked(i) || !mc.caps.has(k) || mc.lists[k].loaded {
				continue
			}
			ls := &mc.lists[k]
			if ls.loading == nil {
				ls.loading = make(chan struct{})
				go c.load(mc, k, ls.gen, ls.loading)
			}
			waits = append(waits, ls.loading)
		}
	}
	c.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return
		}
	}
}

// completeLocked reports whether every visible member's list of kind k is
// known: loaded, or failed to load (the member is left out until a list
// loads it again; a name of its own says why it cannot be routed), so that
// a member whose list hangs delays the calls to the others once, by its
// timeout, and not every call again while it hangs (found by the fault
// tests). Called with c.mu held.
func (c *conn) completeLocked(k kind) bool {
	for i, mc := range c.members {
		if c.visibleLocked(i) && mc.caps.has(k) && !mc.lists[k].loaded && mc.lists[k].err == nil {
			return false
		}
	}
	return true
}

// load fetches member mc's whole list of kind k, for generation gen.
func (c *conn) load(mc *member, k kind, gen uint64, done chan struct{}) {
	defer close(done)
	ctx, cancel := c.memberCtxOf(c.ctx, mc)
	defer cancel()
	pages, err := c.fetchAll(ctx, mc.i, k)
	c.mu.Lock()
	ls := &mc.lists[k]
	if ls.loading == done {
		ls.loading = nil
	}
	if ls.gen == gen {
		if err == nil {
			ls.pages, ls.loaded = pages, true
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

// fetchAll fetches every page of member i's list of kind k.
func (c *conn) fetchAll(ctx context.Context, i int, k kind) ([]page, error) {
	var pages []page
	seen := map[string]bool{"": true}
	cursor := ""
	for {
		if len(pages) == maxPages {
			return nil, fmt.Errorf("server %q: %s has more than %d pages", c.e.member(i).Name, kindInfo[k].method, maxPages)
		}
		p, err := c.fetchPage(ctx, i, k, cursor)
		if err != nil {
			return nil, err
		}
		pages = append(pages, p)
		if p.next == "" {
			return pages, nil
		}
		if seen[p.next] {
			return nil, fmt.Errorf("server %q: %s gave cursor %q twice", c.e.member(i).Name, kindInfo[k].method, p.next)
		}
		seen[p.next] = true
		cursor = p.next
	}
}

// fetchPage fetches member i's page of kind k at cursor.
func (c *conn) fetchPage(ctx context.Context, i int, k kind, cursor string) (page, error) {
	var params []byte
	if cursor != "" {
		params = append(append([]byte(`{"cursor":`), quote(cursor)...), '}')
	}
	result, err := c.call(ctx, i, kindInfo[k].method, params)
	if err != nil {
		return page{}, err
	}
	p, err := parsePage(k, cursor, result)
	if err != nil {
		return page{}, fmt.Errorf("server %q: %w", c.e.member(i).Name, err)
	}
	return p, nil
}

// listedLocked returns member i's pages of kind k when it is visible and
// they are loaded, else nil. Called with c.mu held.
func (c *conn) listedLocked(i int, k kind) []page {
	mc := c.members[i]
	if !c.visibleLocked(i) || !mc.caps.has(k) || !mc.lists[k].loaded {
		return nil
	}
	return mc.lists[k].pages
}

// viewLocked returns the view of kind k, built again when anything
// changed since. Called with c.mu held.
func (c *conn) viewLocked(k kind) *view {
	if v := c.views[k]; v != nil && c.viewEpoch[k] == c.epoch {
		return v
	}
	lists := make([][]page, len(c.members))
	for i := range c.members {
		lists[i] = c.listedLocked(i, k)
	}
	c.views[k], c.viewEpoch[k] = c.e.buildView(k, lists, c.allowed), c.epoch
	return c.views[k]
}

// list answers a client's tools/list, prompts/list, resources/list or
// resources/templates/list: the page at its cursor.
func (c *conn) list(ctx context.Context, p *pending, k kind, cursor string, hasCursor bool) {
	start, mcursor := 0, ""
	if hasCursor {
		var err error
		if start, mcursor, err = decodeCursor(cursor, c.memberCount()); err != nil {
			c.fail(p, errorf(jsonrpc.CodeInvalidParams, "invalid cursor %q: not one this endpoint gave", clip(cursor)))
			return
		}
	}
	c.ensure(ctx, k)
	if ctx.Err() != nil {
		return // answered: cancelled, abandoned or closed
	}
	c.mu.Lock()
	items, next, stale := c.pageLocked(k, start, mcursor)
	cache := c.cachingLocked(k)
	c.mu.Unlock()
	if stale >= 0 {
		// A cursor of a page the session no longer has (the member's list
		// changed since): the member's own page, as the member gives it now.
		mctx, cancel := c.memberCtxFrom(ctx, stale)
		pg, err := c.fetchPage(mctx, stale, k, mcursor)
		cancel()
		if err != nil {
			c.fail(p, err)
			return
		}
		c.mu.Lock()
		v := c.viewLocked(k)
		items = v.renderFresh(c.e, stale, &pg, c.allowed)
		cache = cache.merge(&pg, false)
		next = ""
		if pg.next != "" {
			next = encodeCursor(stale, pg.next)
		} else {
			next = c.nextLocked(v, k, stale+1, 0)
		}
		c.mu.Unlock()
	}
	c.answer(p, listResult(k, items, next, cache))
}

// cachingLocked folds the caching hints of every page of kind k the
// session has of its visible members: what the merged list may be cached
// for depends on all of them (a change in one renames or hides items of
// another). A list a member's policy filtered for the session's
// principal is never public: another principal's differs. Called with
// c.mu held.
func (c *conn) cachingLocked(k kind) caching {
	var cache caching
	first := true
	for i := range c.members {
		pages := c.listedLocked(i, k)
		for j := range pages {
			cache = cache.merge(&pages[j], first)
			first = false
		}
		if len(pages) > 0 && c.e.policy(i) != nil {
			cache.public = false
		}
	}
	return cache
}

// pageLocked returns the first page with items at or after member start's
// page at cursor, and the cursor of the next one; stale is the member whose
// cursor the session does not know (-1 if none). Called with c.mu held.
func (c *conn) pageLocked(k kind, start int, cursor string) (items []json.RawMessage, next string, stale int) {
	v := c.viewLocked(k)
	for i := start; i < len(c.members); i, cursor = i+1, "" {
		pages := c.listedLocked(i, k)
		j := 0
		if cursor != "" && pages != nil {
			if j = pageAt(pages, cursor); j < 0 {
				return nil, "", i
			}
		}
		for ; j < len(pages); j++ {
			if items = v.render(i, &pages[j], nil); len(items) > 0 {
				return items, c.nextLocked(v, k, i, j+1), -1
			}
		}
	}
	return nil, "", -1
}

// nextLocked returns the cursor of the first page with items at or after
// member i's page j, or "" if there is none. Called with c.mu held.
func (c *conn) nextLocked(v *view, k kind, i, j int) string {
	for ; i < len(c.members); i, j = i+1, 0 {
		pages := c.listedLocked(i, k)
		for ; j < len(pages); j++ {
			if v.count(i, &pages[j]) > 0 {
				return encodeCursor(i, pages[j].cursor)
			}
		}
	}
	return ""
}

// pageAt returns the index of the page fetched with cursor, or -1.
func pageAt(pages []page, cursor string) int {
	for j := range pages {
		if pages[j].cursor == cursor {
			return j
		}
	}
	return -1
}

// clip shortens a client's value quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
