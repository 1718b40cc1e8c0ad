package aggregate

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestListChangedCoalesced: members' list changes reach the client as one
// notification per kind for a burst, and make the session list again.
func TestListChangedCoalesced(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{}`)
	cl.tools()
	c := cl.conn.(*clientSession)
	c.listChanged(0, 1<<kindTools)
	c.listChanged(1, 1<<kindTools)
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	// A member's own notification, through its server.
	if got := text(t, cl.callTool(1, "b__list_changed", `{"kind":"prompts"}`)); got != "ok" {
		t.Fatalf("list_changed tool: %q", got)
	}
	cl.general.waitNotification(t, "notifications/prompts/list_changed")
	n := 0
	cl.general.mu.Lock()
	for _, m := range cl.general.sends {
		if strings.Contains(string(m), "tools/list_changed") {
			n++
		}
	}
	cl.general.mu.Unlock()
	if n != 1 {
		t.Errorf("%d tools/list_changed for one burst, want 1", n)
	}
	if n := len(cl.tools()); n != 2*builtinTools {
		t.Errorf("%d tools listed again", n)
	}
}

// TestResourceUpdatedForwarded: a member's resources/updated for a URI the
// client subscribed to (through the endpoint) reaches the client.
func TestResourceUpdatedForwarded(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ResourceTemplates: []string{"note://{id}"}, Resources: []string{"file:///x"}}})
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{}`)
	cl.result(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"note://7"}}`)
	if got := text(t, cl.callTool(2, "b__touch", `{"uri":"note://7"}`)); got != "touched" {
		t.Fatalf("touch: %q", got)
	}
	cl.general.waitNotification(t, "notifications/resources/updated")
}

// TestSessionIsolatedMember: a member with a process per session is
// initialized with the client's initialize and ended with the session.
func TestSessionIsolatedMember(t *testing.T) {
	mb := marker(t, "b")
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMemberWith(t, "b", testkit.FakeOptions{Marker: mb}, func(s *config.Server) { s.Isolation = config.IsolationSession })
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{"roots":{}}`)
	if got := text(t, cl.callTool(1, "b__capabilities", `{}`)); got != `{"roots":{}}` {
		t.Errorf("b's process saw capabilities %q, want the client's", got)
	}
	if got := text(t, cl.callTool(2, "b__initialized", `{}`)); got != "true" {
		t.Errorf("b initialized: %q", got)
	}
	if n := len(testkit.Procs(mb)); n != 1 {
		t.Errorf("%d processes of b", n)
	}
	cl.conn.Close()
	if left := testkit.WaitProcsGone(mb, wait); len(left) > 0 {
		t.Errorf("b's process outlived the session: %v", left)
	}
}
