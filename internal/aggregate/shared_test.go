package aggregate

import (
	"bytes"
	"encoding/json"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestSharedListMemory: one member of 20,000 tools (in pages of 5,000)
// and 25 sessions each listing its tools: the member's list is fetched
// once, the merged list built once, and every session is answered with
// all of it; past the first session (which pays for the one shared copy),
// the heap grows by far less than one copy of the list per session (the
// figures are logged: go test -v -run TestSharedListMemory).
func TestSharedListMemory(t *testing.T) {
	const tools, sessions = 20000, 25
	tap := newListTap(fakeMember(t, "big", testkit.FakeOptions{Catalog: testkit.CatalogOptions{GeneratedTools: tools, ToolPageSize: 5000}}))
	e := newEndpoint(t, Options{}, tap.member)
	heap0, rss0 := memNow()
	var heap1 uint64
	var rss1 int64
	clients := make([]*client, sessions)
	size := 0
	for s := range clients {
		clients[s] = connect(t, e, `{}`)
		res := clients[s].bigResult(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
		// Counted, not decoded: a JSON decoder under -race takes seconds
		// for each of these 11 MB. Only tools have a "name" here.
		if n := bytes.Count(res, []byte(`"name":"`)); n != tools+builtinTools+1 || bytes.Contains(res, []byte(`"nextCursor"`)) {
			t.Fatalf("session %d: %d tools, or a nextCursor: want %d in one page", s, n, tools+builtinTools+1)
		}
		size = len(res)
		if s == 0 {
			heap1, rss1 = memNow()
		}
	}
	heap2, rss2 := memNow()
	perSession := (int64(heap2) - int64(heap1)) / (sessions - 1)
	t.Logf("%d sessions x %d tools (list %d bytes): heap %.1f MB before, %.1f MB after the first session, %.1f MB after all (%+.3f MB per later session); RSS %.1f, %.1f, %.1f MB (%+.3f MB per later session); at the member: %d fetches, %d pages; %d views built",
		sessions, tools, size, float64(heap0)/1e6, float64(heap1)/1e6, float64(heap2)/1e6, float64(perSession)/1e6,
		float64(rss0)/1e6, float64(rss1)/1e6, float64(rss2)/1e6, float64(rss2-rss1)/1e6/(sessions-1),
		tap.fetches.Load(), tap.pages.Load(), e.views.builds.Load())
	if n := tap.fetches.Load(); n != 1 {
		t.Errorf("the member's list was fetched %d times for %d sessions, want once", n, sessions)
	}
	if n := tap.pages.Load(); n != 5 {
		t.Errorf("%d pages fetched, want the member's 5 once", n)
	}
	if n := e.views.builds.Load(); n != 1 {
		t.Errorf("the merged list was built %d times, want once", n)
	}
	if perSession > int64(size)/10 {
		t.Errorf("the heap grew by %d bytes per session, the list is %d: want far less than one copy per session", perSession, size)
	}
	runtime.KeepAlive(clients)
}

// bigResult is result without decoding the reply nor keeping it in the
// stream's history.
func (cl *client) bigResult(raw string) []byte {
	cl.t.Helper()
	out := newStream()
	cl.handle(raw, out)
	r := out.reply(cl.t)
	out.mu.Lock()
	out.replies = nil
	out.mu.Unlock()
	m, err := jsonrpc.Parse(r)
	head := `{"jsonrpc":"2.0","id":` + string(m.Bytes(m.ID)) + `,"result":`
	if err != nil || m.IsError || !bytes.HasPrefix(r, []byte(head)) {
		cl.t.Fatalf("%s: reply %.300s, want a result (%v)", raw, r, err)
	}
	return r[len(head) : len(r)-1]
}

// memNow returns the heap in use after a collection, and the process's
// resident set.
func memNow() (heap uint64, rss int64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	data, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			rss = kb << 10
		}
	}
	return ms.HeapAlloc, rss
}

// TestIsolatedListsPerSession: a session-isolated member (a process per
// session) is fetched by each session, its list may differ per session;
// sessions whose lists are the same share one copy and one merged list.
func TestIsolatedListsPerSession(t *testing.T) {
	tap := newListTap(fakeMemberWith(t, "iso", testkit.FakeOptions{}, func(s *config.Server) { s.Isolation = config.IsolationSession }))
	if tap.member.SharedLists {
		t.Fatal("a session-isolated member with SharedLists")
	}
	e := newEndpoint(t, Options{}, tap.member)
	const sessions = 4
	var wg sync.WaitGroup
	for range sessions {
		cl := connect(t, e, `{}`)
		wg.Go(func() {
			if n := len(cl.tools()); n != builtinTools+1 {
				t.Errorf("%d tools", n)
			}
		})
	}
	wg.Wait()
	if n := tap.fetches.Load(); n != sessions {
		t.Errorf("%d fetches for %d sessions of a session-isolated member, want one each", n, sessions)
	}
	if n := e.lists.size(); n != 1 {
		t.Errorf("%d lists kept for %d sessions with the same list, want one", n, sessions)
	}
	if n := e.views.builds.Load(); n != 1 {
		t.Errorf("%d merged lists built, want one", n)
	}
	// One session's list changes: it alone has another.
	tap.version.Store(2)
	cl := connect(t, e, `{}`)
	if got := cl.tools(); !strings.Contains(strings.Join(got, " "), "iso__v2") {
		t.Errorf("the new session's tools %v, want its own list (version 2)", got)
	}
	if n := e.lists.size(); n != 2 {
		t.Errorf("%d lists kept, want two (version 1 shared, version 2)", n)
	}
}

// prefixPolicy lets a principal use the items whose names start with its
// own name (and an anonymous one every item).
type prefixPolicy struct{}

func (prefixPolicy) Allows(p *auth.Principal, _, name string, _ json.RawMessage) bool {
	return p == nil || strings.HasPrefix(name, p.Name)
}
func (prefixPolicy) AllowsAll(p *auth.Principal, _ string) bool { return p == nil }

// TestPolicyViewsShared: a member's policy filters its list per
// principal: sessions of principals with the same decisions share one
// merged list (of another name, even), each sees only what it may use,
// and the member's list is fetched once for all.
func TestPolicyViewsShared(t *testing.T) {
	m := fakeMember(t, "a", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"alice_1", "alice_2", "bob_1"}}})
	m.Policy = prefixPolicy{}
	tap := newListTap(m)
	e := newEndpoint(t, Options{}, tap.member)
	connectAs := func(who string) *client {
		ctx := conn.WithPrincipal(t.Context(), &auth.Principal{Name: who, Kind: auth.KindKey})
		c, err := e.Open(ctx, newStream())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		cl := &client{t: t, conn: c, general: newStream()}
		cl.result(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		return cl
	}
	for _, who := range []string{"alice", "bob", "alice", "bob", "bob"} {
		got := strings.Join(connectAs(who).tools(), " ")
		want := map[string]string{"alice": "a__alice_1 a__alice_2", "bob": "a__bob_1"}[who]
		if got != want {
			t.Errorf("%s's tools: %q, want %q", who, got, want)
		}
	}
	// carol's decisions are bob's minus one: her own merged list.
	if got := connectAs("carol").tools(); len(got) != 0 {
		t.Errorf("carol's tools: %v, want none", got)
	}
	if n := tap.fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want one for every principal", n)
	}
	if n := e.views.builds.Load(); n != 3 {
		t.Errorf("%d merged lists built, want 3: alice's, bob's, carol's", n)
	}
}

// TestSharedListDroppedWithLastSession: a shared list is kept while
// sessions are there to hear the member's list_changed; once the last
// session has ended, a change nobody heard is not hidden from the next
// session by the list kept from before.
func TestSharedListDroppedWithLastSession(t *testing.T) {
	tap := newListTap(fakeMember(t, "a", testkit.FakeOptions{}))
	e := newEndpoint(t, Options{}, tap.member)
	one, two := connect(t, e, `{}`), connect(t, e, `{}`)
	one.tools()
	two.tools()
	if n := tap.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for two sessions, want one", n)
	}
	one.conn.Close()
	if got := connect(t, e, `{}`).tools(); !slices.Contains(got, "a__v1") || tap.fetches.Load() != 1 {
		t.Errorf("a third session while the second is open: %v, %d fetches: want the kept list", got, tap.fetches.Load())
	}
	e.mu.Lock()
	left := make([]*clientSession, 0, len(e.sessions))
	for c := range e.sessions {
		left = append(left, c)
	}
	e.mu.Unlock()
	for _, c := range left {
		c.Close()
	}
	tap.version.Store(2) // changed while no session listens
	if got := connect(t, e, `{}`).tools(); !slices.Contains(got, "a__v2") {
		t.Errorf("a session after the last one ended: %v, want the member's list as it is now (a__v2)", got)
	}
	if n := tap.fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}
