package aggregate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Fault tests of a session's resource subscriptions across membership
// changed in place (subscriptions.go, and relay.go's filter of
// resources/updated).

// TestFaultSubscriptionAcrossRenewal: the client subscribed to a member's
// resource; a reload replaces the member. The client is not told its
// subscription ended (nothing in the protocol says so), so the member
// that replaces it must have it too: the new process's resources/updated
// for that URI reaches the client.
func TestFaultSubscriptionAcrossRenewal(t *testing.T) {
	catalog := testkit.CatalogOptions{ResourceTemplates: []string{"note://{id}"}}
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b1 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b1"), Catalog: catalog})
	b2 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b2"), Catalog: catalog})
	e := newEndpoint(t, Options{}, a, b1)
	cl := connect(t, e, `{}`)
	cl.result(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"note://7"}}`)
	if got := text(t, cl.callTool(2, "b__touch", `{"uri":"note://7"}`)); got != "touched" {
		t.Fatalf("touch: %q", got)
	}
	cl.general.waitNotification(t, "notifications/resources/updated")

	if err := e.SetMembers([]Member{a, b2}); err != nil {
		t.Fatal(err)
	}
	tab, _ := e.table()
	sess := cl.conn.(*clientSession)
	testkit.WaitFor(t, "b's new session", func() bool {
		sess.mu.Lock()
		defer sess.mu.Unlock()
		mc := sess.members[1]
		return mc.gen == tab[1].gen && mc.up
	})
	before := cl.general.countSent("notifications/resources/updated")
	id := 100
	testkit.WaitFor(t, "resources/updated from the new b", func() bool {
		id++
		if got := text(t, cl.callTool(id, "b__touch", `{"uri":"note://7"}`)); got != "touched" {
			t.Fatalf("touch on the new b: %q", got)
		}
		return cl.general.countSent("notifications/resources/updated") > before
	})
	// Unsubscribed while b is removed (whatever the answer), it is not
	// subscribed again when b comes back.
	if err := e.SetMembers([]Member{a}); err != nil {
		t.Fatal(err)
	}
	cl.do(`{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"note://7"}}`)
	sess.mu.Lock()
	n := len(sess.subs)
	sess.mu.Unlock()
	if n != 0 {
		t.Errorf("%d subscriptions kept after the client unsubscribed", n)
	}
}

// denyResources is a policy hiding the resources whose URI starts with
// prefix.
type denyResources struct{ prefix string }

func (p *denyResources) Allows(_ *auth.Principal, kind, name string, _ json.RawMessage) bool {
	return kind != "resource" || !strings.HasPrefix(name, p.prefix)
}
func (p *denyResources) AllowsAll(_ *auth.Principal, kind string) bool { return kind != "resource" }

// TestFaultPolicyTightenedStopsResourceUpdates: the client subscribed to a
// member's resource; a reload gives the member a policy that hides it
// (the policy alone: the member's session is kept, and so is the
// subscription at the member). The resource's resources/updated must not
// reach the client any longer, as a read of it does not.
func TestFaultPolicyTightenedStopsResourceUpdates(t *testing.T) {
	catalog := testkit.CatalogOptions{ResourceTemplates: []string{"note://{id}"}, Resources: []string{"file:///open"}}
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{Catalog: catalog})
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{}`)
	for id, uri := range []string{"note://7", "file:///open"} {
		cl.result(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":%q}}`, 10+id, uri))
	}
	if got := text(t, cl.callTool(2, "b__touch", `{"uri":"note://7"}`)); got != "touched" {
		t.Fatalf("touch: %q", got)
	}
	cl.general.waitNotification(t, "notifications/resources/updated")

	tight := b
	tight.Policy = &denyResources{prefix: "note://"}
	if err := e.SetMembers([]Member{a, tight}); err != nil {
		t.Fatal(err)
	}
	if r := cl.do(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"note://7"}}`); !strings.Contains(string(r), `"error"`) {
		t.Fatalf("read of a resource the new policy hides: %s", r)
	}
	before := cl.general.countSent(`"uri":"note://7"`)
	// b's notifications reach the session in order: once the allowed
	// resource's update is there, the hidden one's would be too.
	for id, uri := range []string{"note://7", "file:///open"} {
		if got := text(t, cl.callTool(4+id, "b__touch", fmt.Sprintf(`{"uri":%q}`, uri))); got != "touched" {
			t.Fatalf("touch %s: %q", uri, got)
		}
	}
	testkit.WaitFor(t, "the allowed resource's update", func() bool {
		return cl.general.countSent(`"uri":"file:///open"`) > 0
	})
	if n := cl.general.countSent(`"uri":"note://7"`) - before; n > 0 {
		t.Errorf("%d resources/updated of note://7, which the policy now hides, reached the client", n)
	}
}
