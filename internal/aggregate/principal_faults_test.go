package aggregate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// scopePolicy lets a principal use the items named "admin_*" only with
// the scope "admin", every other item always.
type scopePolicy struct{}

func (scopePolicy) Allows(p *auth.Principal, _, name string, _ json.RawMessage) bool {
	return !strings.HasPrefix(name, "admin_") || p != nil && slices.Contains(p.Scopes, "admin")
}
func (scopePolicy) AllowsAll(p *auth.Principal, _ string) bool {
	return p != nil && slices.Contains(p.Scopes, "admin")
}

// TestMemberPolicyFollowsRequestPrincipal: alice opens a session with the
// scope "admin", then her requests come with a token (or a reloaded API
// key) without it. The front lets them into her session (same kind and
// name) and applies a target's policy with each request's principal; a
// member's policy must too: on the old code the session listed and
// called admin_1 with the scopes it was opened with. Her scope back, the
// tool is hers again; and bob's session, of the same decisions as alice
// without the scope, shares that view.
func TestMemberPolicyFollowsRequestPrincipal(t *testing.T) {
	m := fakeMember(t, "a", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"admin_1", "open_1"}}})
	m.Policy = scopePolicy{}
	e := newEndpoint(t, Options{}, m)
	admin := &auth.Principal{Name: "alice", Kind: auth.KindKey, Scopes: []string{"admin"}}
	plain := &auth.Principal{Name: "alice", Kind: auth.KindKey, Scopes: []string{}}

	c, err := e.Open(conn.WithPrincipal(t.Context(), admin), newStream())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	as := func(p *auth.Principal, raw string) []byte {
		t.Helper()
		msg, err := jsonrpc.Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		out := newStream()
		c.Handle(conn.WithPrincipal(context.Background(), p), &msg, out)
		return out.reply(t)
	}
	tools := func(p *auth.Principal) []string {
		t.Helper()
		var r struct {
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		reply := as(p, `{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
		if err := json.Unmarshal(reply, &r); err != nil {
			t.Fatalf("tools/list: %s", reply)
		}
		var names []string
		for _, tool := range r.Result.Tools {
			if strings.Contains(tool.Name, "_1") {
				names = append(names, tool.Name)
			}
		}
		return names
	}
	call := func(p *auth.Principal) bool {
		t.Helper()
		reply := as(p, `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"a__admin_1","arguments":{}}}`)
		msg, err := jsonrpc.Parse(reply)
		if err != nil {
			t.Fatalf("tools/call: %s", reply)
		}
		return !msg.IsError
	}
	as(admin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)

	if got := tools(admin); !slices.Equal(got, []string{"a__admin_1", "a__open_1"}) {
		t.Errorf("with the scope: %v", got)
	}
	if got := tools(plain); !slices.Equal(got, []string{"a__open_1"}) {
		t.Errorf("the scope lost: %v, want a__open_1 only", got)
	}
	if call(plain) {
		t.Errorf("the scope lost: admin_1 called")
	}
	if got := tools(admin); !slices.Equal(got, []string{"a__admin_1", "a__open_1"}) {
		t.Errorf("the scope back: %v", got)
	}
	if !call(admin) {
		t.Errorf("the scope back: admin_1 refused")
	}

	builds := e.views.builds.Load()
	bob, err := e.Open(conn.WithPrincipal(t.Context(), &auth.Principal{Name: "bob", Kind: auth.KindKey}), newStream())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bob.Close)
	cl := &client{t: t, conn: bob, general: newStream()}
	cl.result(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if got := strings.Join(cl.tools(), " "); strings.Contains(got, "admin_1") || !strings.Contains(got, "a__open_1") {
		t.Errorf("bob's tools: %s", got)
	}
	if n := e.views.builds.Load(); n != builds {
		t.Errorf("bob's list built again (%d builds, was %d): alice's without the scope is the same", n, builds)
	}
}

// TestPolicyViewsUnderConcurrentFirstLists: sessions of alice and bob on
// one endpoint, whose member's policy gives each only their own tools,
// all list at once while the member's one shared fetch is held (every
// session waits for the same list), then again after the member's
// list_changed: every session sees exactly its principal's tools of the
// member's current list, never the other's, and the member is fetched
// once per version.
func TestPolicyViewsUnderConcurrentFirstLists(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"alice_1", "bob_1"}}})
	direct := a.Backend
	a.Policy = prefixPolicy{}
	tap := newListTap(a)
	e := newEndpoint(t, Options{}, tap.member)
	type session struct {
		who string
		cl  *client
	}
	var sessions []session
	for range 4 {
		for _, who := range []string{"alice", "bob"} {
			general := newStream()
			c, err := e.Open(conn.WithPrincipal(t.Context(), &auth.Principal{Name: who, Kind: auth.KindKey}), general)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			cl := &client{t: t, conn: c, general: general}
			cl.result(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			cl.handle(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
			sessions = append(sessions, session{who, cl})
		}
	}
	listAll := func(version int64) {
		t.Helper()
		held := tap.holdNext()
		outs := make([]*stream, len(sessions))
		for i, s := range sessions {
			outs[i] = s.cl.send(`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
		}
		held.waitEntered(t)
		close(held.released)
		for i, s := range sessions {
			r := string(outs[i].reply(t))
			other := map[string]string{"alice": "bob", "bob": "alice"}[s.who]
			if !strings.Contains(r, `"a__`+s.who+`_1"`) || strings.Contains(r, `"a__`+other+`_1"`) || strings.Contains(r, fmt.Sprintf(`"a__v%d"`, version)) {
				t.Errorf("version %d, %s's session %d: %.300s", version, s.who, i, r)
			}
		}
		if n := tap.fetches.Load(); n != version {
			t.Errorf("%d fetches after version %d, want one per version", n, version)
		}
	}
	listAll(1)
	tap.version.Store(2)
	if got := text(t, openDirect(t, direct).callTool(1, "list_changed", `{}`)); got != "ok" {
		t.Fatalf("list_changed: %q", got)
	}
	for _, s := range sessions {
		s.cl.general.waitNotification(t, "notifications/tools/list_changed")
	}
	listAll(2)
}
