package aggregate

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/mcpgate/mcpgate/internal/conn"
)

// This file is the endpoint's membership: the members by index (slots),
// and SetMembers, which changes them under running sessions (a config
// reload) so that those sessions are kept.
//
// A member's index is in every session's table of members, in the cursors
// of merged lists and in the ids of server requests relayed to clients, so
// an index stays with one server name for the endpoint's life: a member
// removed leaves its slot behind (a tombstone: calls to its names are
// answered "removed"), a member added takes a new slot at the end (lists
// show it after the members there before), and a name added again takes
// its old slot back. The slots therefore grow with the names an endpoint
// ever had, never with the number of reloads.
//
// A slot's generation says which sessions of the member a session may
// keep: SetMembers bumps it when the member's Backend or any field that
// shapes what the member exposes (prefix, filter, critical, timeout)
// changed, or the member was removed or added again. Each session then
// ends its session of the old member (its requests in flight answered
// with the reason) and opens one on the new member in the background (as
// a member that comes up later joins a session), and the client hears
// list_changed. A change of Policy alone keeps the member's sessions: the
// lists are loaded again, filtered by the new policy.
//
// Locking: slots and tableVer are guarded by Endpoint.mu; a session's
// table (conn.members) by conn.mu. Lock order: conn.mu before
// Endpoint.mu, never the other way round (SetMembers tells the sessions
// after unlocking).

// slot is one member index of the endpoint.
type slot struct {
	// guarded by Endpoint.mu:
	m       *Member // as last set; never modified (a change sets a new one)
	gen     uint64  // bumped when the sessions of the member must be opened anew
	removed bool    // not a member since a SetMembers
	st      memberState

	// Rate limits of the member's log lines, locked by themselves.
	leftOut rateLimit // "left out of a merged list"
	hidden  rateLimit // "hidden from a session"
}

// newSlot returns the slot of member m, in state ready (text).
func newSlot(m Member, ready bool, text string) *slot {
	return &slot{m: &m, st: memberState{ready: ready, text: text, wasReady: ready}}
}

// slotView is a slot as of one moment.
type slotView struct {
	m       *Member
	gen     uint64
	removed bool
	st      memberState
}

// table returns the slots as they are now, and the version of the table.
func (e *Endpoint) table() ([]slotView, uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tab := make([]slotView, len(e.slots))
	for i, s := range e.slots {
		tab[i] = slotView{s.m, s.gen, s.removed, s.st}
	}
	return tab, e.tableVer
}

// member returns member i as last set (a removed one: as it was).
func (e *Endpoint) member(i int) *Member {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slots[i].m
}

// policy returns member i's Policy as last set: a change of policy alone
// applies to the member's sessions in place.
func (e *Endpoint) policy(i int) conn.Policy { return e.member(i).Policy }

// slotAt returns slot i, for its rate limits.
func (e *Endpoint) slotAt(i int) *slot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slots[i]
}

// CheckMembers reports whether members could be the endpoint's members,
// with the error New would give: a config reload checks every endpoint
// before it changes anything.
func (e *Endpoint) CheckMembers(members []Member) error {
	return checkMembers(e.opts, e.naming, members)
}

// SetMembers makes members the endpoint's members, in place: the sessions
// open stay open (see the file comment). Members are matched by Name; a
// member's Backend and Policy are compared by identity (==), so a caller
// passes the same objects for what did not change. It
// fails, changing nothing, with CheckMembers's error, or when the
// endpoint is closed. It waits for no member: the sessions of members
// removed or renewed are closed without waiting, and the new ones opened
// in the background.
func (e *Endpoint) SetMembers(members []Member) error {
	if err := e.CheckMembers(members); err != nil {
		return err
	}
	// The new members' states, read before locking (State may lock the
	// member's backend).
	states := make([]memberState, len(members))
	for j := range members {
		states[j].ready, states[j].text = pollMember(&members[j])
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	index := make(map[string]int, len(e.slots))
	for i, s := range e.slots {
		index[s.m.Name] = i
	}
	changed := false
	kept := make([]bool, len(e.slots))
	var added, renewed, removed, updated []string
	for j := range members {
		m := members[j]
		i, ok := index[m.Name]
		if !ok {
			e.slots = append(e.slots, newSlot(m, states[j].ready, states[j].text))
			kept = append(kept, true)
			added, changed = append(added, m.Name), true
			continue
		}
		kept[i] = true
		s := e.slots[i]
		switch {
		case s.removed || !sameSessions(s.m, &m):
			if s.removed {
				added = append(added, m.Name)
			} else {
				renewed = append(renewed, m.Name)
			}
			// A new member under the old index: its state from scratch,
			// its seq going on (sessions ignore an older one).
			s.m, s.gen, s.removed = &m, s.gen+1, false
			s.st = memberState{ready: states[j].ready, text: states[j].text, seq: s.st.seq + 1, wasReady: states[j].ready}
			changed = true
		case !identical(s.m.Policy, m.Policy):
			s.m = &m
			updated, changed = append(updated, m.Name), true
		}
	}
	for i, s := range e.slots {
		if !kept[i] && !s.removed {
			s.removed, s.gen = true, s.gen+1
			s.st.ready = false
			s.st.seq++
			removed, changed = append(removed, s.m.Name), true
		}
	}
	var sessions []*clientSession
	if changed {
		e.tableVer++
		sessions = make([]*clientSession, 0, len(e.sessions))
		for c := range e.sessions {
			sessions = append(sessions, c)
		}
	}
	e.mu.Unlock()
	if !changed {
		return nil
	}
	// The lists of members removed or replaced are nobody's any longer
	// (their sessions' loads under way keep what they fetch to themselves),
	// nor are the merged lists made with the old members.
	e.pruneShared()
	e.views.clear()
	e.log.Info("members changed in place; sessions kept",
		"added", added, "removed", removed, "renewed", renewed, "policy_changed", updated, "sessions", len(sessions))
	for _, c := range sessions {
		c.reconcile()
	}
	return nil
}

// sameSessions reports whether sessions of member a serve member b: the
// same backend, exposing the same things, its lists fetched the same way
// (only the policy may differ, which the endpoint applies itself). The
// shared lists and the views are keyed by the generation this keeps.
func sameSessions(a, b *Member) bool {
	return identical(a.Backend, b.Backend) && a.Prefix == b.Prefix && a.Critical == b.Critical &&
		a.Timeout == b.Timeout && a.SharedLists == b.SharedLists && reflect.DeepEqual(a.Filter, b.Filter)
}

// identical reports whether a and b are the same value, by ==: the same
// Backend or Policy object (the gateway keeps an unchanged server's and
// an unchanged policy's). A value of a type == cannot compare (it would
// panic) counts as changed.
func identical(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if ta := reflect.TypeOf(a); ta != reflect.TypeOf(b) || !ta.Comparable() {
		return false
	}
	return a == b
}

// pollMember reads m's state (always ready without State).
func pollMember(m *Member) (bool, string) {
	if m.State == nil {
		return true, "ready"
	}
	return m.State()
}

// checkMembers is New's and SetMembers's check of the options and members.
func checkMembers(opts Options, names naming, members []Member) error {
	where := fmt.Sprintf("endpoint %q", opts.Name)
	switch {
	case len(members) == 0:
		return fmt.Errorf("%s: no servers", where)
	case opts.MaxNameLen < minMaxNameLen:
		return fmt.Errorf("%s: MaxNameLen %d is under %d, too short for a shortened name", where, opts.MaxNameLen, minMaxNameLen)
	}
	for _, f := range []struct {
		name string
		g    Globs
	}{{"tools", opts.Filter.Tools}, {"prompts", opts.Filter.Prompts}, {"resources", opts.Filter.Resources}} {
		if err := f.g.check(where + ": " + f.name); err != nil {
			return err
		}
	}
	byName, byPrefix := map[string]bool{}, map[string]string{}
	prefixOf := map[string]string{}
	for _, m := range members {
		switch {
		case m.Name == "":
			return fmt.Errorf("%s: a server without a name", where)
		case m.Backend == nil:
			return fmt.Errorf("%s: server %q has no backend", where, m.Name)
		case byName[m.Name]:
			return fmt.Errorf("%s: server %q is listed twice", where, m.Name)
		}
		byName[m.Name] = true
		// Prefixes compared as exposed: with SnakeCase, "MyServer" and
		// "my-server" are one prefix, and every name of the two would
		// collide (found by the fault tests).
		exposed := names.exposedPrefix(m.Prefix)
		if other, dup := byPrefix[exposed]; dup && m.Prefix != "" {
			if prefixOf[other] != m.Prefix {
				return fmt.Errorf("%s: servers %q and %q have prefixes %q and %q, the same in snake_case: their names would collide", where, other, m.Name, prefixOf[other], m.Prefix)
			}
			return fmt.Errorf("%s: servers %q and %q have the same prefix %q: their names would collide", where, other, m.Name, m.Prefix)
		}
		byPrefix[exposed], prefixOf[m.Name] = m.Name, m.Prefix
		for _, f := range []struct {
			name string
			g    Globs
		}{{"tools", m.Filter.Tools}, {"prompts", m.Filter.Prompts}, {"resources", m.Filter.Resources}} {
			if err := f.g.check(fmt.Sprintf("%s: server %q: %s", where, m.Name, f.name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Reasons a session's member session ends on a SetMembers; the client's
// requests in flight to it are answered with them.
func removedReason(server, endpoint string) string {
	return fmt.Sprintf("server %q was removed from endpoint %q by a config reload", server, endpoint)
}

func renewedReason(server, endpoint string) string {
	return fmt.Sprintf("server %q of endpoint %q was replaced by a config reload (its config changed); retry", server, endpoint)
}

// reconcile brings the session's members up to the endpoint's table: a
// member removed becomes a tombstone, a member added or renewed gets a new
// entry whose session is opened in the background (join), a member whose
// policy alone changed has its lists loaded again. The client hears
// list_changed for what left and, once it is up, for what joined. Tables
// are applied in order: an older one than the session has is ignored.
func (c *clientSession) reconcile() {
	tab, ver := c.e.table()
	c.mu.Lock()
	if c.closed || ver <= c.tableVer {
		c.mu.Unlock()
		return
	}
	c.tableVer = ver
	members := slices.Clone(c.members)
	type ending struct {
		conn   conn.Conn
		reason string
	}
	var ended []ending
	var joins []*member
	var changed kindSet
	for i, s := range tab {
		var old *member
		if i < len(members) {
			old = members[i]
		} else {
			members = append(members, nil)
		}
		if old != nil && old.gen == s.gen {
			if !old.removed && old.seen != s.m {
				old.seen = s.m
				for k := range numKinds {
					old.lists[k].reset()
				}
				if old.ready && old.up && old.conn != nil {
					changed |= old.caps.kinds()
				}
			}
			continue
		}
		reason := renewedReason(s.m.Name, c.e.opts.Name)
		if s.removed {
			reason = removedReason(s.m.Name, c.e.opts.Name)
		}
		mc := &member{i: i, m: s.m, gen: s.gen, seen: s.m, ready: s.st.ready, seq: s.st.seq}
		if old != nil {
			if old.stopJoin != nil {
				old.stopJoin() // its Open is nobody's now (found by the fault tests)
			}
			if old.conn != nil {
				ended = append(ended, ending{old.conn, reason})
			}
			if old.ready && old.up && old.conn != nil {
				changed |= old.caps.kinds()
			}
		}
		if s.removed {
			// What it listed stays known: a call to one of its names is
			// answered with the reason, not "unknown".
			mc.removed, mc.failed = true, reason
			if old != nil {
				mc.caps = old.caps
				for k := range numKinds {
					mc.lists[k].list, mc.lists[k].loaded = old.lists[k].list, old.lists[k].loaded
				}
			}
		} else {
			mc.apart = c.stateless && s.m.OpenStateless != nil
			mc.joinCtx, mc.stopJoin = c.memberCtxOf(c.ctx, mc)
			joins = append(joins, mc)
		}
		members[i] = mc
	}
	c.members = members
	c.epoch++
	c.notifyLocked(changed)
	c.mu.Unlock()
	for _, x := range ended {
		x.conn.CloseWith(x.reason)
	}
	for _, mc := range joins {
		go c.join(mc)
	}
}

// join opens the session of member mc, which joined the endpoint (or was
// renewed) after the session opened, and initializes it if the client has
// initialized and the member is ready (else memberState will, when it
// becomes ready). It is bounded by the member's Timeout, the session, and
// mc's staying the session's member (reconcile ends it when a later
// reload replaces mc: else reload after reload of a member whose Open
// hangs would leave one goroutine each until the session ends).
func (c *clientSession) join(mc *member) {
	ctx, cancel := mc.joinCtx, mc.stopJoin
	defer cancel()
	var mconn conn.Conn
	var err error
	if mc.apart {
		mconn, err = mc.m.OpenStateless(ctx, memberGeneral{c, mc}, c.caps)
	} else {
		mconn, err = mc.m.Backend.Open(ctx, memberGeneral{c, mc})
	}
	c.mu.Lock()
	if c.closed || c.members[mc.i] != mc {
		c.mu.Unlock()
		if mconn != nil {
			mconn.Close()
		}
		return
	}
	if err != nil {
		mc.failed = "opening its session failed: " + err.Error()
		c.mu.Unlock()
		c.e.log.Info("member not available to a session", "server", mc.m.Name, "err", err)
		return
	}
	mc.conn = mconn
	if c.version != "" && mc.ready && !mc.up && !mc.initing {
		c.startInitLocked(mc)
	}
	c.mu.Unlock()
}

// attached reports whether mc is still the session's member at its index
// (not removed or renewed since).
func (c *clientSession) attached(mc *member) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && mc.i < len(c.members) && c.members[mc.i] == mc
}

// liveMembers returns the session's members that are not tombstones.
func (c *clientSession) liveMembers() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var live []*member
	for _, mc := range c.members {
		if !mc.removed {
			live = append(live, mc)
		}
	}
	return live
}

// memberAt returns the session's member i.
func (c *clientSession) memberAt(i int) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i]
}

// memberCount returns the size of the session's table of members.
func (c *clientSession) memberCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.members)
}
