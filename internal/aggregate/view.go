package aggregate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is what the endpoint makes of its members' lists, independent
// of how they were fetched (a session's member connections, or requests of
// the stateless revision): pages of items, the table of exposed names that
// routes calls back (and finds collisions), the resource index, and the
// rendering of a merged page.

// kind is one of the four lists an endpoint merges.
type kind uint8

const (
	kindTools kind = iota
	kindPrompts
	kindResources
	kindTemplates
	numKinds
)

// kindInfo describes each kind: the list method, the result's array, the
// key each item is known by, and the list_changed notification.
var kindInfo = [numKinds]struct {
	method, field, key, changed, noun string
}{
	kindTools:     {protocol.MethodToolsList, "tools", "name", protocol.NotificationToolsListChanged, "tool"},
	kindPrompts:   {protocol.MethodPromptsList, "prompts", "name", protocol.NotificationPromptsListChanged, "prompt"},
	kindResources: {protocol.MethodResourcesList, "resources", "uri", protocol.NotificationResourcesListChanged, "resource"},
	kindTemplates: {protocol.MethodResourcesTemplateList, "resourceTemplates", "uriTemplate", protocol.NotificationResourcesListChanged, "resource template"},
}

// kindSet is a set of kinds (bit k for kind k).
type kindSet uint8

func (s kindSet) has(k kind) bool { return s&(1<<k) != 0 }

// named reports whether items of k are renamed (tools, prompts) rather
// than kept (resources and templates keep their URIs).
func (k kind) named() bool { return k == kindTools || k == kindPrompts }

// item is one entry of a member's list: its JSON as the member gave it,
// and its name, URI or URI template.
type item struct {
	raw json.RawMessage
	key string
}

// page is one page of a member's list: the member cursor that fetched it
// ("" for the first) and the cursor of the next ("" for none).
type page struct {
	cursor, next string
	items        []item
	// The member's caching hints for it (2026-07-28): ttlMs, -1 when it
	// gave none (a server of the session eras), and whether cacheScope
	// was "public" (absent counts as private).
	ttl    int64
	public bool
}

// parsePage reads a member's list result of kind k. Items without their
// key are dropped: nothing could route to them.
func parsePage(k kind, cursor string, result []byte) (page, error) {
	var r map[string]json.RawMessage
	if err := json.Unmarshal(result, &r); err != nil {
		return page{}, fmt.Errorf("unreadable %s result: %v", kindInfo[k].method, err)
	}
	var raws []json.RawMessage
	if v, ok := r[kindInfo[k].field]; ok {
		if err := json.Unmarshal(v, &raws); err != nil {
			return page{}, fmt.Errorf("unreadable %s result: %q: %v", kindInfo[k].method, kindInfo[k].field, err)
		}
	}
	p := page{cursor: cursor, items: make([]item, 0, len(raws)), ttl: -1}
	if v, ok := r["ttlMs"]; ok {
		var ttl int64
		if json.Unmarshal(v, &ttl) == nil && ttl >= 0 {
			p.ttl = ttl
		}
	}
	if v, ok := r["cacheScope"]; ok {
		var scope string
		p.public = json.Unmarshal(v, &scope) == nil && scope == "public"
	}
	if v, ok := r["nextCursor"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &p.next); err != nil {
			return page{}, fmt.Errorf("unreadable %s result: nextCursor: %v", kindInfo[k].method, err)
		}
	}
	for _, raw := range raws {
		key, _, ok := findString(raw, kindInfo[k].key)
		if ok && key != "" {
			p.items = append(p.items, item{raw: raw, key: key})
		}
	}
	return p, nil
}

// entry is a member's item by its own key.
type entry struct {
	member int
	key    string
}

// view is what the endpoint exposes of one kind, from the lists of the
// members that are up: for tools and prompts, the exposed names and
// whose they are; for resources and templates, what each member lists.
// Filtered items are not in it at all.
type view struct {
	kind kind
	// byName maps an exposed name to its owner (tools, prompts).
	byName map[string]entry
	// exposed is byName reversed: what a member's item is listed as.
	exposed map[entry]string
	// collisions are the exposed names several items map to, with them:
	// listed by none, callable by none.
	collisions map[string][]entry
	// keys is every (member, URI or template) listed and allowed
	// (resources, templates).
	keys map[entry]bool
	// templates are the templates' compiled forms (nil: malformed).
	templates map[entry]*regexp.Regexp

	// The merged list, rendered: members in config order, each member's
	// items in its own order.
	// whole is the list's result in one page, as a client gets it.
	whole []byte
	// spans locate each item of the list in whole.
	spans []span
	// first[i] is the index of member i's first item in the list;
	// first[len(members)] is the number of items.
	first []int
	// cache is the caching hints of the whole list.
	cache caching
	// size is about the bytes the view holds (what MaxListBytes counts).
	size int64
}

// span is an item's place in view.whole.
type span struct{ start, end int }

// buildView makes the view of kind k from lists[i], member i's list (nil:
// the member is not visible, has no such list, or its list could not be
// had) and members[i], the member it is of (its prefix and policy),
// letting through what allowed allows.
func (e *Endpoint) buildView(k kind, lists []*memberList, members []*Member, allowed func(int, kind, string) bool) *view {
	v := &view{kind: k, byName: map[string]entry{}, exposed: map[entry]string{}, keys: map[entry]bool{}}
	type listed struct {
		en entry
		it *item
	}
	var order []listed
	for i, l := range lists {
		if l == nil {
			continue
		}
		for j := range l.items {
			it := &l.items[j]
			en := entry{i, it.key}
			if !allowed(i, k, it.key) || v.keys[en] {
				continue // filtered, or listed twice by the member
			}
			v.keys[en] = true
			order = append(order, listed{en, it})
			if k == kindTemplates {
				if v.templates == nil {
					v.templates = map[entry]*regexp.Regexp{}
				}
				v.templates[en] = templateRegexp(it.key)
			}
			if !k.named() {
				continue
			}
			name := e.naming.expose(members[i].Prefix, it.key)
			if others, ok := v.collisions[name]; ok {
				v.collisions[name] = append(others, en)
				continue
			}
			if first, ok := v.byName[name]; ok {
				delete(v.byName, name)
				delete(v.exposed, first)
				if v.collisions == nil {
					v.collisions = map[string][]entry{}
				}
				v.collisions[name] = []entry{first, en}
				continue
			}
			v.byName[name] = en
			v.exposed[en] = name
		}
	}
	for name, ens := range v.collisions {
		e.warnCollision(k, name, ens)
	}

	// The list itself, now that the collisions are known.
	first := true
	for i, l := range lists {
		if l == nil {
			continue
		}
		v.cache = v.cache.mergeAll(l.cache, first)
		first = false
		if members[i].Policy != nil {
			v.cache.public = false // another principal's differs
		}
	}
	v.first = make([]int, len(lists)+1)
	b := listHead(k, v.cache)
	v.spans = make([]span, 0, len(order))
	member := 0
	for _, o := range order {
		for ; member < o.en.member; member++ {
			v.first[member+1] = len(v.spans)
		}
		name, ok := v.lets(o.en.member, o.en.key)
		if !ok {
			continue
		}
		if len(v.spans) > 0 {
			b = append(b, ',')
		}
		start := len(b)
		b = appendRenamed(b, k, o.it, name)
		v.spans = append(v.spans, span{start, len(b)})
		v.size += int64(len(o.it.key)) + 48 // keys
		if k.named() {
			v.size += 2 * (int64(len(name)+len(o.it.key)) + 64) // byName, exposed
		}
	}
	for ; member < len(lists); member++ {
		v.first[member+1] = len(v.spans)
	}
	v.whole = append(b, ']', '}')
	v.size += int64(cap(v.whole)) + int64(len(v.spans))*16 + int64(len(v.first))*8
	return v
}

// warnCollision logs a collision once per endpoint (each session that
// builds the same view would repeat it).
func (e *Endpoint) warnCollision(k kind, name string, ens []entry) {
	key := fmt.Sprint(k, name, ens)
	if _, dup := e.warned.LoadOrStore(key, true); dup {
		return
	}
	e.log.Warn(kindInfo[k].noun+" name collision: left out of the endpoint's list; calls to it get an error",
		"name", name, "servers", e.describe(ens))
}

// describe words the owners of colliding items: `"a" (tool "x"), "b" (tool "x")`.
func (e *Endpoint) describe(ens []entry) string {
	parts := make([]string, len(ens))
	for j, en := range ens {
		parts[j] = fmt.Sprintf("%q (%q)", e.member(en.member).Name, en.key)
	}
	return strings.Join(parts, ", ")
}

// lets reports whether member i's item key is in the view, and its
// exposed name (tools, prompts).
func (v *view) lets(i int, key string) (string, bool) {
	en := entry{i, key}
	if !v.keys[en] {
		return "", false
	}
	if !v.kind.named() {
		return key, true
	}
	name, ok := v.exposed[en] // not when it collides
	return name, ok
}

// appendRenamed appends an item listed under name: tools and prompts get
// their "name" replaced, every other byte as the member wrote it.
func appendRenamed(b []byte, k kind, it *item, name string) []byte {
	if !k.named() || name == it.key {
		return append(b, it.raw...)
	}
	_, span, ok := findString(it.raw, kindInfo[k].key)
	if !ok {
		return append(b, it.raw...) // unreachable: parsePage found it
	}
	return jsonrpc.Splice(b, it.raw, jsonrpc.Edit{Span: span, Value: quote(name)})
}

// caching is the caching hints of a merged list: the smallest ttlMs of
// the members' pages, private if any is; known only when every page gave
// one (else the front gives the revision's safe 0 and private).
type caching struct {
	known  bool
	ttl    int64
	public bool
}

// merge folds page p into c (the zero caching is "no page yet").
func (c caching) merge(p *page, first bool) caching {
	switch {
	case p.ttl < 0:
		return caching{}
	case first:
		return caching{known: true, ttl: p.ttl, public: p.public}
	case !c.known:
		return c
	}
	return caching{known: true, ttl: min(c.ttl, p.ttl), public: c.public && p.public}
}

// mergeAll folds the hints of a member's whole list into c, as merge
// does a page's.
func (c caching) mergeAll(o caching, first bool) caching {
	switch {
	case !o.known:
		return caching{}
	case first:
		return o
	case !c.known:
		return c
	}
	return caching{known: true, ttl: min(c.ttl, o.ttl), public: c.public && o.public}
}

// listHead returns the beginning of a list result of kind k, up to its
// array's '['.
func listHead(k kind, cache caching) []byte {
	b := []byte{'{'}
	if cache.known {
		scope := "private"
		if cache.public {
			scope = "public"
		}
		b = fmt.Appendf(b, `"ttlMs":%d,"cacheScope":%q,`, cache.ttl, scope)
	}
	return append(append(b, quote(kindInfo[k].field)...), ':', '[')
}

// count returns the number of items in the merged list.
func (v *view) count() int { return len(v.spans) }

// page returns the result of items [from, to) of the merged list, with
// next as its nextCursor ("" for none).
func (v *view) page(from, to int, next string) []byte {
	b := listHead(v.kind, v.cache)
	if from < to {
		b = append(b, v.whole[v.spans[from].start:v.spans[to-1].end]...)
	}
	b = append(b, ']')
	if next != "" {
		b = append(append(b, `,"nextCursor":`...), quote(next)...)
	}
	return append(b, '}')
}

// at returns the position of item j of the merged list: its member and
// how many of that member's items come before it.
func (v *view) at(j int) (member, offset int) {
	m := sort.SearchInts(v.first, j+1) - 1 // the last member starting at or before j
	return m, j - v.first[m]
}

// templateRegexp compiles an RFC 6570 template, read as level 1, into
// the expansions it can make: literal text around {var} expressions, each
// variable one or more characters other than '/' (level 1 encodes '/' in
// values), or any text for the operators of the higher levels ("{+var}",
// "{/var}" and the like). Enough to route a URI to the member whose
// template made it; a regexp (RE2) because URIs come from clients, and
// backtracking over many variables would be theirs to exploit.
func templateRegexp(tmpl string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			b.WriteString(regexp.QuoteMeta(tmpl))
			break
		}
		closing := strings.IndexByte(tmpl[open:], '}')
		if closing < 0 {
			return nil // malformed: matches itself only
		}
		b.WriteString(regexp.QuoteMeta(tmpl[:open]))
		if expr := tmpl[open+1 : open+closing]; expr != "" && strings.ContainsRune("+#./;?&", rune(expr[0])) {
			b.WriteString(".*")
		} else {
			b.WriteString("[^/]+")
		}
		tmpl = tmpl[open+closing+1:]
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil
	}
	return re
}

// ownersOf returns the members that list uri, or a template it matches
// (when none lists it), among those v (resources) and tv (templates) let
// through; sorted by member.
func ownersOf(uri string, v, tv *view) (owners []int, byTemplate bool) {
	for en := range v.keys {
		if en.key == uri {
			owners = append(owners, en.member)
		}
	}
	if len(owners) == 0 {
		for en := range tv.keys {
			if en.key == uri || tv.templates[en] != nil && tv.templates[en].MatchString(uri) {
				owners = append(owners, en.member)
			}
		}
		byTemplate = true
	}
	slices.Sort(owners)
	return slices.Compact(owners), byTemplate
}

// errorf is a JSON-RPC error of the endpoint's own.
func errorf(code int, format string, args ...any) *rpcError {
	return &rpcError{code, "mcpgate: " + fmt.Sprintf(format, args...)}
}
