package aggregate

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// These tests are of SetMembers (members.go) under the endpoint's shared
// lists and views (shared.go, viewcache.go): what a membership changed in
// place does to the merged lists that running sessions share.

// onePage lists the session's tools as Claude's clients read them: one
// tools/list, no cursor followed. It fails on a nextCursor.
func (cl *client) onePage() []string {
	cl.t.Helper()
	keys, pages := cl.listAll("tools/list", "tools", "name")
	if len(pages) != 1 {
		cl.t.Fatalf("tools/list in %d pages, want one", len(pages))
	}
	return keys
}

// TestSetMembersAddedInSharedView: a member added to an endpoint whose
// sessions have listed its tools: the next one-page tools/list of each
// running session has the new member's tools, after the others', and the
// sessions share the one merged list made of it.
func TestSetMembersAddedInSharedView(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a)
	one, two := connect(t, e, `{}`), connect(t, e, `{}`)
	for _, cl := range []*client{one, two} {
		if n := len(cl.onePage()); n != builtinTools {
			t.Fatalf("%d tools before, want %d", n, builtinTools)
		}
	}
	builds := e.views.builds.Load()
	if err := e.SetMembers([]Member{a, b}); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []*client{one, two} {
		cl.general.waitNotification(t, "notifications/tools/list_changed") // b is up in the session
		tools := cl.onePage()
		if len(tools) != 2*builtinTools || !slices.Contains(tools, "b__echo") {
			t.Fatalf("tools after b joined: %v", tools)
		}
		for _, name := range tools[builtinTools:] {
			if !strings.HasPrefix(name, "b__") {
				t.Errorf("%q among b's tools: the member added is listed after the others", name)
			}
		}
	}
	if n := e.views.builds.Load() - builds; n != 1 {
		t.Errorf("%d merged lists built for two sessions after b joined, want one shared", n)
	}
}

// TestSetMembersRemovedFromSharedView: a member removed leaves the merged
// list every session shares (and a session opened after shares it too),
// and the endpoint no longer keeps its shared lists.
func TestSetMembersRemovedFromSharedView(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a, b)
	one, two := connect(t, e, `{}`), connect(t, e, `{}`)
	for _, cl := range []*client{one, two} {
		if n := len(cl.onePage()); n != 2*builtinTools {
			t.Fatalf("%d tools before, want %d", n, 2*builtinTools)
		}
	}
	if n := e.sharedCount(); n != 2 {
		t.Fatalf("%d members' shared lists kept, want 2", n)
	}
	builds := e.views.builds.Load()
	if err := e.SetMembers([]Member{a}); err != nil {
		t.Fatal(err)
	}
	three := connect(t, e, `{}`)
	for _, cl := range []*client{one, two, three} {
		tools := cl.onePage()
		if len(tools) != builtinTools || slices.ContainsFunc(tools, func(n string) bool { return strings.HasPrefix(n, "b__") }) {
			t.Errorf("tools after b left: %v", tools)
		}
	}
	if n := e.views.builds.Load() - builds; n != 1 {
		t.Errorf("%d merged lists built for three sessions after b left, want one shared", n)
	}
	if n := e.sharedCount(); n != 1 {
		t.Errorf("%d members' shared lists kept after b left, want a's only", n)
	}
}

// TestSetMembersPolicyRebuildsView: a member's policy replaced by another
// (both filtering) keeps the member's shared list, but the sessions' merged
// list follows the new policy: the policy's say is part of the view's key
// for that policy, not only for the list.
func TestSetMembersPolicyRebuildsView(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	a.Policy = &allowOnly{tools: []string{"echo", "pid", "slow"}}
	tap := newListTap(a)
	e := newEndpoint(t, Options{}, tap.member)
	cl := connect(t, e, `{}`)
	if got := cl.onePage(); !slices.Equal(got, []string{"a__echo", "a__slow", "a__pid"}) {
		t.Fatalf("tools under the first policy: %v", got)
	}
	a2 := tap.member
	a2.Policy = &allowOnly{tools: []string{"echo"}}
	if err := e.SetMembers([]Member{a2}); err != nil {
		t.Fatal(err)
	}
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	if got := cl.onePage(); !slices.Equal(got, []string{"a__echo"}) {
		t.Errorf("tools under the new policy: %v, want [a__echo]", got)
	}
	if got := connect(t, e, `{}`).onePage(); !slices.Equal(got, []string{"a__echo"}) {
		t.Errorf("a new session's tools under the new policy: %v, want [a__echo]", got)
	}
	if n := tap.fetches.Load(); n != 1 {
		t.Errorf("the member's tools fetched %d times across a change of its policy alone, want once", n)
	}
}

// TestSetMembersCursorOfJoiningMember: a member added but not up yet
// contributes nothing to the merged list, yet the session's table has its
// index: a cursor naming it (a client's, which is not trusted) is answered
// from a view made for that table, never one made before the member was
// added (whose positions stop one member short).
func TestSetMembersCursorOfJoiningMember(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	b.State = func() (bool, string) { return false, "starting" }
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	cl.onePage() // the view of the one-member table
	if err := e.SetMembers([]Member{a, b}); err != nil {
		t.Fatal(err)
	}
	if n := cl.conn.(*clientSession).memberCount(); n != 2 {
		t.Fatalf("the session's table has %d members after SetMembers returned, want 2", n)
	}
	res := cl.result(`{"jsonrpc":"2.0","id":"c","method":"tools/list","params":{"cursor":"` + encodeCursor(1, 0) + `"}}`)
	var r struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor *string           `json:"nextCursor"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Tools) != 0 || r.NextCursor != nil {
		t.Errorf("the page at b, which lists nothing yet: %s, want no tools and no nextCursor", res)
	}
	if got := cl.onePage(); len(got) != builtinTools {
		t.Errorf("%d tools, want a's %d", len(got), builtinTools)
	}
}

// TestSetMembersSharedListsBounded: reload storms that remove a shared
// member, add it back and replace its server, over and over, while a
// session lists its tools after each: the endpoint keeps the shared lists
// of its current members only, not one more per reload.
func TestSetMembersSharedListsBounded(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b1 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b1")})
	b2 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b2")})
	e := newEndpoint(t, Options{}, a, b1)
	cl := connect(t, e, `{}`)
	cl.onePage()
	const rounds = 8
	for n := range rounds {
		for _, members := range [][]Member{{a}, {a, b1}, {a, b2}} {
			if err := e.SetMembers(members); err != nil {
				t.Fatal(err)
			}
			if len(members) == 1 {
				continue
			}
			// b's lists are fetched (and shared) again once it is up.
			testkit.WaitFor(t, "b listed", func() bool { return slices.Contains(cl.onePage(), "b__echo") })
			if got := e.sharedCount(); got > 2 {
				t.Fatalf("round %d: %d members' shared lists kept, want at most 2 (a, b)", n, got)
			}
		}
	}
	if got := e.sharedCount(); got != 2 {
		t.Errorf("%d members' shared lists kept after %d reloads, want 2 (a, b)", got, 3*rounds)
	}
	// The merged lists made for the members before each reload are
	// dropped too (the cache's byte bound is far above these): what is
	// left is the last members' tools list, and the one listed while b
	// was joining if the session listed then.
	if views, _ := e.views.stats(); views > 2 {
		t.Errorf("%d merged lists kept after %d reloads, want the last members' (at most 2)", views, 3*rounds)
	}
}

// TestSetMembersListStorm: sessions list their tools without pause while
// a member is removed, added back and replaced over and over: every list
// is answered with a result in one page holding the staying member's
// tools whole and the other's whole or not at all, and once the reloads
// end every session lists both.
func TestSetMembersListStorm(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b1 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b1")})
	b2 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b2")})
	e := newEndpoint(t, Options{}, a, b1)
	const sessions, reloads = 4, 30
	clients := make([]*client, sessions)
	for i := range clients {
		clients[i] = connect(t, e, `{}`)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var lists atomic.Int64
	for _, cl := range clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				out := newStream()
				cl.handle(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`, out)
				var r []byte
				select {
				case r = <-out.replied:
				case <-time.After(wait):
					t.Error("a tools/list got no reply")
					return
				}
				lists.Add(1)
				var m struct {
					Result *struct {
						Tools []struct {
							Name string `json:"name"`
						} `json:"tools"`
						NextCursor *string `json:"nextCursor"`
					} `json:"result"`
				}
				if err := json.Unmarshal(r, &m); err != nil || m.Result == nil || m.Result.NextCursor != nil {
					t.Errorf("tools/list: %s, want a result in one page", r)
					return
				}
				var na, nb int
				for _, tool := range m.Result.Tools {
					switch {
					case strings.HasPrefix(tool.Name, "a__"):
						na++
					case strings.HasPrefix(tool.Name, "b__"):
						nb++
					}
				}
				if na != builtinTools || nb != 0 && nb != builtinTools || na+nb != len(m.Result.Tools) {
					t.Errorf("tools/list gave %d of a's tools and %d of b's (of %d): want a's %d, and b's all or none", na, nb, len(m.Result.Tools), builtinTools)
					return
				}
			}
		})
	}
	sets := [][]Member{{a}, {a, b1}, {a, b2}}
	for n := range reloads {
		if err := e.SetMembers(sets[n%len(sets)]); err != nil {
			t.Fatal(err)
		}
		// A few lists between two reloads, some while members join.
		target := lists.Load() + sessions
		testkit.WaitFor(t, "lists between reloads", func() bool { return lists.Load() >= target })
	}
	close(stop)
	wg.Wait()
	t.Logf("%d lists from %d sessions across %d reloads", lists.Load(), sessions, reloads)
	for _, cl := range clients {
		testkit.WaitFor(t, "b listed", func() bool { return len(cl.onePage()) == 2*builtinTools })
	}
	if got := e.sharedCount(); got > 2 {
		t.Errorf("%d members' shared lists kept, want at most 2 (a, b)", got)
	}
}
