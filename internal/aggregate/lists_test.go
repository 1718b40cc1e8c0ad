package aggregate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// pagedMembers returns members a (tools in pages of 3) and b (pages of 4,
// session-isolated: its list is fetched by each session), with prompts,
// resources and templates of their own.
func pagedMembers(t *testing.T) []Member {
	cat := func(name string, pageSize int) testkit.CatalogOptions {
		return testkit.CatalogOptions{
			ToolPageSize:      pageSize,
			Prompts:           []string{name + "-p1", name + "-p2"},
			Resources:         []string{"mem://" + name + "/1", "mem://" + name + "/2"},
			ResourceTemplates: []string{"mem://" + name + "/t/{id}"},
		}
	}
	a := fakeMember(t, "a", testkit.FakeOptions{Catalog: cat("a", 3)})
	b := fakeMemberWith(t, "b", testkit.FakeOptions{Catalog: cat("b", 4)}, func(s *config.Server) { s.Isolation = config.IsolationSession })
	return []Member{a, b}
}

// TestMergedListsOnePageEveryKind: tools, prompts, resources and
// templates of two members (one shared, one session-isolated), each
// answered by one list request holding every member's items, in config
// order, with no nextCursor; listed again, and by another session, the
// same bytes.
func TestMergedListsOnePageEveryKind(t *testing.T) {
	e := newEndpoint(t, Options{}, pagedMembers(t)...)
	cl := connect(t, e, `{}`)
	for _, tc := range []struct {
		method, field, key string
		want               []string
	}{
		{"prompts/list", "prompts", "name", []string{"a__a-p1", "a__a-p2", "b__b-p1", "b__b-p2"}},
		{"resources/list", "resources", "uri", []string{"mem://a/1", "mem://a/2", "mem://b/1", "mem://b/2"}},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", []string{"mem://a/t/{id}", "mem://b/t/{id}"}},
	} {
		got, pages := cl.listAll(tc.method, tc.field, tc.key)
		if !slices.Equal(got, tc.want) || len(pages) != 1 {
			t.Errorf("%s: %v in pages %v, want %v in one page", tc.method, got, pages, tc.want)
		}
	}
	tools, pages := cl.listAll("tools/list", "tools", "name")
	if len(tools) != 2*builtinTools || len(pages) != 1 || tools[0] != "a__echo" || tools[builtinTools] != "b__echo" {
		t.Errorf("tools: %d in pages %v (%v), want %d in one page, a's then b's", len(tools), pages, tools, 2*builtinTools)
	}
	first := cl.result(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	other := connect(t, e, `{}`)
	if again := other.result(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); string(again) != string(first) {
		t.Errorf("another session's tools/list differs:\n%s\n%s", again, first)
	}
}

// TestMergedListPageSize: with PageSize 5, the merged list of 32 tools
// (members paging 3 and 4 at a time) comes in pages of 5, 5, 5, 5, 5, 5
// and 2, together the one-page list in the same order, with the same
// cursors every time; a list of at most 5 items is one page.
func TestMergedListPageSize(t *testing.T) {
	members := pagedMembers(t)
	whole := newEndpoint(t, Options{Name: "whole"}, members...)
	want := connect(t, whole, `{}`).tools()

	e := newEndpoint(t, Options{PageSize: 5}, members...)
	cl := connect(t, e, `{}`)
	names, pages := cl.listAll("tools/list", "tools", "name")
	if !slices.Equal(pages, []int{5, 5, 5, 5, 5, 5, 2}) {
		t.Errorf("page sizes %v, want six of 5 and one of 2", pages)
	}
	if !slices.Equal(names, want) {
		t.Errorf("paged: %v\nwant the one-page list %v", names, want)
	}
	cursors := func() []string {
		var cs []string
		cursor := ""
		for range 10 {
			params := "{}"
			if cursor != "" {
				params = fmt.Sprintf(`{"cursor":%q}`, cursor)
			}
			var r struct{ NextCursor string }
			if err := json.Unmarshal(cl.result(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":`+params+`}`), &r); err != nil {
				t.Fatal(err)
			}
			if cursor = r.NextCursor; cursor == "" {
				return cs
			}
			cs = append(cs, cursor)
		}
		t.Fatal("the cursors never end")
		return nil
	}
	c1, c2 := cursors(), cursors()
	if !slices.Equal(c1, c2) || len(c1) != 6 {
		t.Errorf("cursors %q then %q, want the same six", c1, c2)
	}
	// The 4th page starts at a's 15th tool: a has 16, so it holds a's
	// last and b's first four.
	if m, off, err := decodeCursor(c1[2], 2); err != nil || m != 0 || off != 15 {
		t.Errorf("third cursor %q is (%d, %d, %v), want a's 15th tool", c1[2], m, off, err)
	}
	if got, pages := cl.listAll("prompts/list", "prompts", "name"); len(got) != 4 || len(pages) != 1 {
		t.Errorf("prompts %v in pages %v, want 4 in one page", got, pages)
	}
}

// TestMergedListStateless: requests of the stateless revision (each its
// own endpoint session) get the whole merged list in one page; with
// PageSize, pages whose cursors work across requests.
func TestMergedListStateless(t *testing.T) {
	paged := testkit.FakeOptions{Catalog: testkit.CatalogOptions{ToolPageSize: 3}}
	a := withStateless(t, fakeMember(t, "a", paged))
	b := withStateless(t, fakeMember(t, "b", paged))
	list := func(e *Endpoint, cursor string) (names []string, next string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		sc, err := e.OpenStateless(ctx, newStream(), "2026-07-28", []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		cl := &client{t: t, conn: sc}
		params := "{}"
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		var r struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(cl.result(`{"jsonrpc":"2.0","id":"s","method":"tools/list","params":`+params+`}`), &r); err != nil {
			t.Fatal(err)
		}
		for _, tl := range r.Tools {
			names = append(names, tl.Name)
		}
		return names, r.NextCursor
	}
	whole, next := list(newEndpoint(t, Options{Name: "whole"}, a, b), "")
	if len(whole) != 2*builtinTools || next != "" || whole[0] != "a__echo" || whole[builtinTools] != "b__echo" {
		t.Fatalf("stateless tools/list: %d tools %v, next %q: want %d in one page", len(whole), whole, next, 2*builtinTools)
	}
	e := newEndpoint(t, Options{Name: "paged", PageSize: 10}, a, b)
	var all []string
	cursor := ""
	for n := 0; ; n++ {
		names, next := list(e, cursor)
		if next != "" && len(names) != 10 || n > 10 {
			t.Fatalf("page %d: %d tools, next %q", n, len(names), next)
		}
		all = append(all, names...)
		if cursor = next; cursor == "" {
			break
		}
	}
	if !slices.Equal(all, whole) {
		t.Errorf("stateless pages: %v, want %v", all, whole)
	}
}

// TestListChangedMidListRetried: a member's list changes while a session
// is fetching it: the session's list request is not answered without the
// member nor with its old list (the list is fetched again), and the list
// fetched before the change is not kept for the endpoint (a new session
// gets the new one without fetching).
func TestListChangedMidListRetried(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	direct := a.Backend // the member's own server, for a client of its own
	tap := newListTap(a)
	e := newEndpoint(t, Options{}, tap.member, fakeMember(t, "b", testkit.FakeOptions{}))
	cl := connect(t, e, `{}`)
	held := tap.holdNext()
	out := cl.send(`{"jsonrpc":"2.0","id":"mid","method":"tools/list"}`)
	held.waitEntered(t) // the fetch of version 1 is at the member
	tap.version.Store(2)
	// a announces its change (to every session of its process).
	other := openDirect(t, direct)
	if got := text(t, other.callTool(1, "list_changed", `{}`)); got != "ok" {
		t.Fatalf("list_changed: %q", got)
	}
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	close(held.released)
	r := string(out.reply(t))
	if !strings.Contains(r, `"a__v2"`) || strings.Contains(r, `"a__v1"`) || !strings.Contains(r, `"b__echo"`) {
		t.Errorf("the list that was being fetched when a changed: %.300s..., want a's version 2 and b's tools", r)
	}
	if n := tap.fetches.Load(); n != 2 {
		t.Errorf("%d fetches of a's list, want 2 (the one under way when it changed, and one after)", n)
	}
	if got := connect(t, e, `{}`).tools(); !slices.Contains(got, "a__v2") || slices.Contains(got, "a__v1") {
		t.Errorf("a new session's tools %v, want a's version 2", got)
	}
	if n := tap.fetches.Load(); n != 2 {
		t.Errorf("a new session fetched a's list again (%d fetches): the one fetched after the change is the endpoint's", n)
	}
}

// openDirect opens and initializes a session of a server itself, not
// through an endpoint.
func openDirect(t *testing.T, be conn.Backend) *client {
	t.Helper()
	general := newStream()
	c, err := be.Open(context.Background(), general)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl := &client{t: t, conn: c, general: general}
	cl.init = cl.result(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	cl.handle(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	return cl
}

// listTap wraps a member's backend: it counts the tools/list requests
// that reach the member (first pages: fetches; all: pages), can hold the
// next fetch until released, and adds a tool v<version> to each fetch's
// first page, the version as it was when the request was sent: a list
// that changes on the test's word.
type listTap struct {
	member  Member
	fetches atomic.Int64
	pages   atomic.Int64
	version atomic.Int64

	mu   sync.Mutex
	hold *gate // guarded by mu
}

func newListTap(m Member) *listTap {
	tap := &listTap{member: m}
	tap.version.Store(1)
	tap.member.Backend = tapBackend{&gateBackend{Backend: m.Backend, hold: tap.holdFor}, tap}
	return tap
}

// holdNext holds the next fetch of the member's tools until the gate
// returned is released.
func (tap *listTap) holdNext() *gate {
	g := newGate("")
	tap.mu.Lock()
	tap.hold = g
	tap.mu.Unlock()
	return g
}

func (tap *listTap) holdFor(msg *jsonrpc.Message) <-chan struct{} {
	if !msg.MethodIs("tools/list") {
		return nil
	}
	tap.mu.Lock()
	g := tap.hold
	tap.hold = nil
	tap.mu.Unlock()
	if g == nil {
		return nil
	}
	close(g.entered)
	return g.released
}

type tapBackend struct {
	conn.Backend
	tap *listTap
}

func (b tapBackend) Open(ctx context.Context, general conn.Stream) (conn.Conn, error) {
	c, err := b.Backend.Open(ctx, general)
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, tap: b.tap}, nil
}

type tapConn struct {
	conn.Conn
	tap *listTap
}

func (c *tapConn) Handle(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.Kind == jsonrpc.KindRequest && msg.MethodIs("tools/list") {
		c.tap.pages.Add(1)
		if _, _, more := findString(msg.Raw, "params", "cursor"); !more {
			c.tap.fetches.Add(1)
			out = versioned{out, c.tap.version.Load()}
		}
	}
	c.Conn.Handle(ctx, msg, out)
}

// versioned adds a tool named v<n> to the tools/list reply it carries.
type versioned struct {
	conn.Stream
	n int64
}

func (v versioned) Reply(msg []byte) {
	tool := fmt.Sprintf(`"tools":[{"name":"v%d","inputSchema":{"type":"object"}},`, v.n)
	v.Stream.Reply([]byte(strings.Replace(string(msg), `"tools":[`, tool, 1)))
}
