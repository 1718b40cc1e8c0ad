package aggregate

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/servers"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Fault tests of membership changed in place (members.go): what a config
// reload must not mix up in a running session.

// TestFaultServerRequestAcrossRenewal: a member's server request still
// open at the client when the member is replaced (or removed and added
// back) by a reload. The new member's process numbers its own requests
// as the old one did, under the same index: the client must see two
// distinct ids, and its late answer to the old request must reach neither
// the new process nor the new call, which gets its own answer.
func TestFaultServerRequestAcrossRenewal(t *testing.T) {
	isolated := func(s *config.Server) { s.Isolation = config.IsolationSession }
	for _, tc := range []struct {
		name   string
		reload func(e *Endpoint, a, b1, b2 Member) error
	}{
		{"replaced", func(e *Endpoint, a, _, b2 Member) error { return e.SetMembers([]Member{a, b2}) }},
		{"removed and added back", func(e *Endpoint, a, b1, _ Member) error {
			if err := e.SetMembers([]Member{a}); err != nil {
				return err
			}
			return e.SetMembers([]Member{a, b1})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := fakeMember(t, "a", testkit.FakeOptions{})
			b1 := fakeMemberWith(t, "b", testkit.FakeOptions{Marker: marker(t, "b1")}, isolated)
			b2 := fakeMemberWith(t, "b", testkit.FakeOptions{Marker: marker(t, "b2")}, isolated)
			e := newEndpoint(t, Options{}, a, b1)
			cl := connect(t, e, `{"sampling":{}}`)
			cl.tools()
			ask := func(id, prompt string) (*stream, serverAsk) {
				t.Helper()
				out := cl.send(toolCall(id, "b__sample", `{"prompt":"`+prompt+`"}`))
				sa := readAsk(t, out)
				if sa.prompt != prompt {
					t.Fatalf("server request %+v on the stream of %s", sa, prompt)
				}
				return out, sa
			}
			oldOut, oldAsk := ask("1", "old")

			if err := tc.reload(e, a, b1, b2); err != nil {
				t.Fatal(err)
			}
			if got := text(t, oldOut.reply(t)); !strings.HasPrefix(got, "error") {
				t.Errorf("the old call: %q, want an error", got)
			}
			// b's new session up, with nothing sent to b meanwhile: the
			// new process has the old one's history (initialize, one
			// tools/list, the sample), so it numbers its request alike.
			tab, _ := e.table()
			sess := cl.conn.(*clientSession)
			testkit.WaitFor(t, "b's new session", func() bool {
				sess.mu.Lock()
				defer sess.mu.Unlock()
				mc := sess.members[1]
				return mc.gen == tab[1].gen && mc.up
			})
			cl.tools()
			newOut, newAsk := ask("2", "new")
			t.Logf("the old process's request %s, the new one's %s", oldAsk.id, newAsk.id)
			if newAsk.id == oldAsk.id {
				t.Errorf("the new process's request has the id %s of the old one's, still open at the client", newAsk.id)
			}
			// The client answers the old request late, then the new one.
			cl.handle(answerTo(oldAsk.id, "stale answer to the old request"), nil)
			cl.handle(answerTo(newAsk.id, "answer to the new request"), nil)
			if got := text(t, newOut.reply(t)); got != "answer to the new request" {
				t.Errorf("the new call: %q, want its own answer (the old request's reached the new process)", got)
			}
			if n := newOut.replyCount(); n != 1 {
				t.Errorf("the new call got %d replies", n)
			}
		})
	}
}

// TestFaultCriticalMemberReplacedDuringInitialize: a reload replaces a
// critical member while a client's initialize waits for it. The old
// member's session is closed under the initialize, which must not fail
// the client's initialize ("critical ... failed"): the member that
// replaces it joins the session as any member added does.
func TestFaultCriticalMemberReplacedDuringInitialize(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b1 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b1")})
	b2 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b2")})
	b1.Critical, b2.Critical = true, true
	entered, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	defer released.Do(func() { close(release) })
	b1.Backend = &gateBackend{Backend: b1.Backend, hold: func(msg *jsonrpc.Message) <-chan struct{} {
		if !msg.MethodIs("initialize") {
			return nil
		}
		var held <-chan struct{}
		once.Do(func() {
			close(entered)
			held = release
		})
		return held
	}}
	e := newEndpoint(t, Options{}, a, b1)
	cl := openSession(t, e)
	out := cl.send(initializeBody)
	select {
	case <-entered:
	case <-time.After(wait):
		t.Fatal("b's initialize never reached b")
	}
	if err := e.SetMembers([]Member{a, b2}); err != nil {
		t.Fatal(err)
	}
	// b1's session is closed now: its initialize goes on, and is
	// answered with the reason.
	released.Do(func() { close(release) })
	if r := out.reply(t); strings.Contains(string(r), `"error"`) {
		t.Fatalf("initialize with b replaced meanwhile: %s, want a result", r)
	}
	cl.handle(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	id := 0
	testkit.WaitFor(t, "the new b in the session", func() bool {
		id++
		return text(t, cl.callTool(id, "b__echo", `{"message":"new b"}`)) == "new b"
	})
}

// holdOpen is a member backend whose Open waits for release before it
// opens the real one; entered is closed when the first Open arrives.
type holdOpen struct {
	conn.Backend
	once     sync.Once
	entered  chan struct{}
	released chan struct{}
}

func (h *holdOpen) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	h.once.Do(func() { close(h.entered) })
	select {
	case <-h.released:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Backend.Open(ctx, general)
}

// TestFaultCriticalMemberReplacedDuringOpen: a session opens while a
// reload replaces a critical member and stops its old server (as the
// gateway does right after SetMembers). The old member's Open fails on the
// stopped server; the session must not fail for it: it is on a table
// older than the endpoint's, and takes the new member when it registers.
func TestFaultCriticalMemberReplacedDuringOpen(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b1 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b1")})
	b2 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b2")})
	b1.Critical, b2.Critical = true, true
	old := b1.Backend.(servers.Server)
	h := &holdOpen{Backend: old, entered: make(chan struct{}), released: make(chan struct{})}
	b1.Backend = h
	e := newEndpoint(t, Options{}, a, b1)

	type opened struct {
		c   conn.Conn
		err error
	}
	done := make(chan opened, 1)
	general := newStream()
	go func() {
		c, err := e.Open(context.Background(), general)
		done <- opened{c, err}
	}()
	select {
	case <-h.entered:
	case <-time.After(wait):
		t.Fatal("the session never opened b")
	}
	if err := e.SetMembers([]Member{a, b2}); err != nil {
		t.Fatal(err)
	}
	old.Close() // the gateway stops the replaced server
	close(h.released)
	var o opened
	select {
	case o = <-done:
	case <-time.After(wait):
		t.Fatal("Open never returned")
	}
	if o.err != nil {
		t.Fatalf("a session opened while its critical member was replaced: %v, want it opened on the new member", o.err)
	}
	t.Cleanup(o.c.Close)
	cl := &client{t: t, conn: o.c, general: general}
	cl.init = cl.result(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	cl.handle(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	id := 0
	testkit.WaitFor(t, "the new b in the session", func() bool {
		id++
		return text(t, cl.callTool(id, "b__echo", `{"message":"new b"}`)) == "new b"
	})
}

// TestFaultCriticalMemberReplacedJoinsDuringInitialize forces the
// interleaving TestFaultCriticalMemberReplacedDuringOpen met about once in
// ten runs: the session opened while a reload replaced b takes the new b
// when it registers, but the new b's Open (join) is still under way when
// the client's initialize looks at the members, and ends before that
// initialize does. The initialize must not leave it out: the new b is
// initialized once the client's initialize is answered.
func TestFaultCriticalMemberReplacedJoinsDuringInitialize(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b1 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b1")})
	b2 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b2")})
	b1.Critical, b2.Critical = true, true
	old := b1.Backend.(servers.Server)
	h1 := &holdOpen{Backend: old, entered: make(chan struct{}), released: make(chan struct{})}
	b1.Backend = h1
	h2 := &holdOpen{Backend: b2.Backend, entered: make(chan struct{}), released: make(chan struct{})}
	b2.Backend = h2
	// a's initialize is held until b's join has ended.
	aInit, aRelease := make(chan struct{}), make(chan struct{})
	var aOnce, aReleased sync.Once
	defer aReleased.Do(func() { close(aRelease) })
	a.Backend = &gateBackend{Backend: a.Backend, hold: func(msg *jsonrpc.Message) <-chan struct{} {
		if !msg.MethodIs("initialize") {
			return nil
		}
		var held <-chan struct{}
		aOnce.Do(func() {
			close(aInit)
			held = aRelease
		})
		return held
	}}
	// The new b ready before the reload: the session takes it as ready,
	// and no later change of its state starts its initialize instead.
	testkit.WaitFor(t, "the new b ready", func() bool {
		ready, _ := b2.State()
		return ready
	})
	e := newEndpoint(t, Options{}, a, b1)

	type opened struct {
		c   conn.Conn
		err error
	}
	done := make(chan opened, 1)
	general := newStream()
	go func() {
		c, err := e.Open(context.Background(), general)
		done <- opened{c, err}
	}()
	testkit.Receive(t, h1.entered, "the session opening b")
	if err := e.SetMembers([]Member{a, b2}); err != nil {
		t.Fatal(err)
	}
	old.Close()
	close(h1.released)
	o := testkit.Receive(t, done, "the session opened")
	if o.err != nil {
		t.Fatalf("a session opened while its critical member was replaced: %v, want it opened on the new b", o.err)
	}
	t.Cleanup(o.c.Close)
	// The session registered and took the new b: its join waits in Open.
	testkit.Receive(t, h2.entered, "the session opening the new b")
	cl := &client{t: t, conn: o.c, general: general}
	out := cl.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	// The initialize chose the members to send it to (a), and waits for a.
	testkit.Receive(t, aInit, "a's initialize")
	close(h2.released)
	tab, _ := e.table()
	sess := o.c.(*clientSession)
	testkit.WaitFor(t, "the new b's session open", func() bool {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		mc := sess.members[1]
		return mc.gen == tab[1].gen && mc.conn != nil
	})
	aReleased.Do(func() { close(aRelease) })
	if r := out.reply(t); strings.Contains(string(r), `"error"`) {
		t.Fatalf("initialize: %s, want a result", r)
	}
	cl.handle(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	id := 0
	testkit.WaitFor(t, "the new b in the session", func() bool {
		id++
		return text(t, cl.callTool(id, "b__echo", `{"message":"new b"}`)) == "new b"
	})
}

// TestFaultRenewalStormLeaksNothing: a member with a process per session
// replaced by 40 reloads in a row, under two sessions, some of which end
// while their member's new session is still joining: at the end each
// session still open has one process of the member, the ones closed none,
// and the session's table and the endpoint's slots did not grow.
func TestFaultRenewalStormLeaksNothing(t *testing.T) {
	isolated := func(s *config.Server) { s.Isolation = config.IsolationSession }
	a := fakeMember(t, "a", testkit.FakeOptions{})
	m1, m2 := marker(t, "b1"), marker(t, "b2")
	b1 := fakeMemberWith(t, "b", testkit.FakeOptions{Marker: m1}, isolated)
	b2 := fakeMemberWith(t, "b", testkit.FakeOptions{Marker: m2}, isolated)
	e := newEndpoint(t, Options{}, a, b1)
	kept := connect(t, e, `{}`)
	const reloads = 40
	for n := range reloads {
		// A session opened in the storm, closed in the middle of it.
		short := connect(t, e, `{}`)
		b := []Member{b2, b1}[n%2]
		if err := e.SetMembers([]Member{a, b}); err != nil {
			t.Fatal(err)
		}
		short.conn.Close()
	}
	// Reload n sets b2 when n is even: an even number of reloads ends on b1.
	last := m1
	if reloads%2 == 1 {
		last = m2
	}
	testkit.WaitFor(t, "b's last session up", func() bool {
		return !strings.HasPrefix(text(t, kept.callTool(1, "b__pid", `{}`)), "error")
	})
	other := m2
	if last == m2 {
		other = m1
	}
	if left := testkit.WaitProcsGone(other, wait); len(left) > 0 {
		t.Errorf("processes of the replaced b left: %v", left)
	}
	testkit.WaitFor(t, "one process of the last b (the open session's)", func() bool {
		return len(testkit.Procs(last)) == 1
	})
	if n := kept.conn.(*clientSession).memberCount(); n != 2 {
		t.Errorf("the session's table has %d members after %d reloads, want 2", n, reloads)
	}
	tab, _ := e.table()
	if len(tab) != 2 {
		t.Errorf("the endpoint has %d slots after %d reloads, want 2", len(tab), reloads)
	}
	kept.conn.Close()
	if left := testkit.WaitProcsGone(last, wait); len(left) > 0 {
		t.Errorf("processes of b left after the last session closed: %v", left)
	}
}

// TestFaultMemberAddedBringsCapabilities: a session initialized while the
// endpoint's members had no completions; a reload adds a member with
// prompts and completions. A client checks the capabilities it was given
// before it calls a method (the TypeScript SDK's complete() refuses
// without "completions"), and a session's capabilities cannot change: so
// the endpoint, whose members can, declares from the start every
// capability a member joining later may bring, and the new member's
// completions work in the kept session.
func TestFaultMemberAddedBringsCapabilities(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{Catalog: testkit.CatalogOptions{Prompts: []string{"greet"}}})
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	var init struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(cl.init, &init); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"tools", "prompts", "resources", "completions", "logging"} {
		if init.Capabilities[c] == nil {
			t.Errorf("capabilities %s: no %q, which a member added later may bring", cl.init, c)
		}
	}
	for _, c := range []string{"tools", "prompts", "resources"} {
		if !strings.Contains(string(init.Capabilities[c]), `"listChanged":true`) {
			t.Errorf("capabilities.%s %s: want listChanged (members join and leave)", c, init.Capabilities[c])
		}
	}
	if err := e.SetMembers([]Member{a, b}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "b's completions in the session", func() bool {
		r := cl.do(`{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"b__greet"},"argument":{"name":"x","value":""}}}`)
		return strings.Contains(string(r), `"values":["greet"]`)
	})
}

// stuckOpen is a member backend whose Open never succeeds: it waits for
// its context (a server at its process cap, a remote that does not
// answer), counting the Opens under way.
type stuckOpen struct {
	conn.Backend
	waiting atomic.Int64
}

func (s *stuckOpen) Open(ctx context.Context, _ conn.Stream) (conn.Conn, error) {
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestFaultSupersededJoinsEnd: reloads replace a member whose Open hangs,
// again and again, under an open session. Each replacement starts the
// member's session anew (join); the joins of the entries replaced since
// are nobody's and must end then, not pile up until the session ends.
func TestFaultSupersededJoinsEnd(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{}`)
	stuck := []*stuckOpen{{Backend: b.Backend}, {Backend: b.Backend}}
	const reloads = 20
	for n := range reloads {
		m := b
		m.Backend = stuck[n%2]
		if err := e.SetMembers([]Member{a, m}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "the joins of replaced entries to end", func() bool {
		return stuck[0].waiting.Load()+stuck[1].waiting.Load() <= 1
	})
	// The last one is the session's: it waits until the session ends.
	cl.conn.Close()
	testkit.WaitFor(t, "the last join to end with the session", func() bool {
		return stuck[0].waiting.Load()+stuck[1].waiting.Load() == 0
	})
}

// TestFaultSessionsOpenedDuringReloads: sessions open (and initialize)
// while reloads swap members in and out. Once the reloads are over, every
// session's table is the endpoint's: each index of the generation the
// endpoint has, a tombstone exactly where the endpoint has one; never a
// mix of an older table and a newer one.
func TestFaultSessionsOpenedDuringReloads(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	c := fakeMember(t, "c", testkit.FakeOptions{})
	b2 := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a, b)
	sets := [][]Member{{a, c}, {a, b2}, {b, c}, {a}, {a, b, c}}
	const openers, each, reloads = 3, 6, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	var clients []*client
	for range openers {
		wg.Go(func() {
			for range each {
				cl := connect(t, e, `{}`)
				mu.Lock()
				clients = append(clients, cl)
				mu.Unlock()
			}
		})
	}
	for n := range reloads {
		if err := e.SetMembers(sets[n%len(sets)]); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	tab, ver := e.table()
	for k, cl := range clients {
		s := cl.conn.(*clientSession)
		s.mu.Lock()
		if s.tableVer != ver || len(s.members) != len(tab) {
			t.Errorf("session %d: table version %d of %d members, the endpoint's %d of %d", k, s.tableVer, len(s.members), ver, len(tab))
		} else {
			for i, mc := range s.members {
				if mc.gen != tab[i].gen || mc.removed != tab[i].removed || mc.seen != tab[i].m {
					t.Errorf("session %d: member %d is %q gen %d removed %v, the endpoint's %q gen %d removed %v",
						k, i, mc.m.Name, mc.gen, mc.removed, tab[i].m.Name, tab[i].gen, tab[i].removed)
				}
			}
		}
		s.mu.Unlock()
	}
	// And they work: the last set is a, b, c.
	for k, cl := range clients {
		testkit.WaitFor(t, "c in every session", func() bool {
			return text(t, cl.callTool(100+k, "c__echo", `{"message":"end"}`)) == "end"
		})
	}
}
