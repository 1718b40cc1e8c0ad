package aggregate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// slowStarted sends a slow call of member's tool that lasts until the test
// ends, and returns its stream once the member has it (its progress came).
func slowStarted(t *testing.T, cl *client, id, tool string) *stream {
	t.Helper()
	out := cl.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":{"ms":3600000,"started":true},"_meta":{"progressToken":%q}}}`, id, tool, id))
	out.next(t) // the progress: the member has the call
	return out
}

// TestSetMembersAdd: a member added keeps the session: the client hears
// tools/list_changed, lists the new member's tools and calls them.
func TestSetMembersAdd(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	if n := len(cl.tools()); n != builtinTools {
		t.Fatalf("%d tools before, want %d", n, builtinTools)
	}
	if err := e.SetMembers([]Member{a, b}); err != nil {
		t.Fatal(err)
	}
	// Every list b has changed the endpoint's, in one burst.
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	cl.general.waitNotification(t, "notifications/prompts/list_changed")
	cl.general.waitNotification(t, "notifications/resources/list_changed")
	tools := cl.tools()
	if len(tools) != 2*builtinTools || !slices.Contains(tools, "b__echo") {
		t.Fatalf("tools after b joined: %v", tools)
	}
	if got := text(t, cl.callTool(1, "b__echo", `{"message":"hi b"}`)); got != "hi b" {
		t.Errorf("b__echo: %q", got)
	}
	if got := text(t, cl.callTool(2, "a__echo", `{"message":"hi a"}`)); got != "hi a" {
		t.Errorf("a__echo: %q", got)
	}
	// A session opened after has both, b in the place it joined.
	cl2 := connect(t, e, `{}`)
	if tools2 := cl2.tools(); !slices.Equal(tools, tools2) {
		t.Errorf("a new session lists %v, want %v", tools2, tools)
	}
}

// TestSetMembersRemove: a member removed keeps the session: its call in
// flight and every later call to it are answered with an error naming it
// and the reload, the other members keep working, and the client hears
// tools/list_changed.
func TestSetMembersRemove(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	mb := marker(t, "b")
	b := fakeMember(t, "b", testkit.FakeOptions{Marker: mb})
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{}`)
	cl.tools()
	inFlight := slowStarted(t, cl, "s1", "b__slow")

	if err := e.SetMembers([]Member{a}); err != nil {
		t.Fatal(err)
	}
	want := `server "b" was removed from endpoint "ep" by a config reload`
	if got := text(t, inFlight.reply(t)); !strings.Contains(got, want) {
		t.Errorf("call in flight to b: %q, want an error containing %q", got, want)
	}
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	if got := text(t, cl.callTool(2, "b__echo", `{"message":"x"}`)); !strings.Contains(got, want) || !strings.HasPrefix(got, "error -32602") {
		t.Errorf("call to b after: %q, want -32602 containing %q", got, want)
	}
	if got := text(t, cl.callTool(3, "a__echo", `{"message":"still"}`)); got != "still" {
		t.Errorf("a__echo: %q", got)
	}
	if tools := cl.tools(); len(tools) != builtinTools || slices.Contains(tools, "b__echo") {
		t.Errorf("tools after b left: %v", tools)
	}
	if n := inFlight.replyCount(); n != 1 {
		t.Errorf("the call in flight got %d replies", n)
	}
	// Added again: it takes its place back, and the session uses it.
	if err := e.SetMembers([]Member{a, b}); err != nil {
		t.Fatal(err)
	}
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	if got := text(t, cl.callTool(4, "b__echo", `{"message":"back"}`)); got != "back" {
		t.Errorf("b__echo after b came back: %q", got)
	}
}

// TestSetMembersRenew: a member whose backend changed (its server was
// replaced) gets a session on the new backend in the running session; its
// call in flight on the old one is answered with the reason.
func TestSetMembersRenew(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b1 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b1")})
	b2 := fakeMember(t, "b", testkit.FakeOptions{Marker: marker(t, "b2")})
	e := newEndpoint(t, Options{}, a, b1)
	cl := connect(t, e, `{}`)
	pid1 := text(t, cl.callTool(1, "b__pid", `{}`))
	inFlight := slowStarted(t, cl, "s1", "b__slow")

	if err := e.SetMembers([]Member{a, b2}); err != nil {
		t.Fatal(err)
	}
	if got := text(t, inFlight.reply(t)); !strings.Contains(got, `server "b" of endpoint "ep" was replaced by a config reload`) {
		t.Errorf("call in flight on the old b: %q", got)
	}
	// Its new session joins in the background; list_changed says when.
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	testkit.WaitFor(t, "b's new session", func() bool {
		return !strings.HasPrefix(text(t, cl.callTool(2, "b__pid", `{}`)), "error")
	})
	if pid2 := text(t, cl.callTool(3, "b__pid", `{}`)); pid2 == pid1 {
		t.Errorf("b still served by pid %s after its backend changed", pid1)
	}
}

// allowOnly is a policy letting through only the tools it names.
type allowOnly struct{ tools []string }

func (p *allowOnly) Allows(_ *auth.Principal, kind, name string, _ json.RawMessage) bool {
	return kind != "tool" || slices.Contains(p.tools, name)
}
func (p *allowOnly) AllowsAll(_ *auth.Principal, kind string) bool { return kind != "tool" }

// TestSetMembersPolicy: a member whose policy alone changed keeps its
// session (the same process serves the call in flight to its end), and
// the session's lists and calls follow the new policy.
func TestSetMembersPolicy(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	cl.tools()
	out := cl.send(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"a__slow","arguments":{"ms":300,"started":true},"_meta":{"progressToken":"s"}}}`)
	out.next(t)

	a2 := a
	a2.Policy = &allowOnly{tools: []string{"echo", "slow"}}
	if err := e.SetMembers([]Member{a2}); err != nil {
		t.Fatal(err)
	}
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	if got := text(t, out.reply(t)); got != "done" {
		t.Errorf("call in flight across a policy change: %q, want done", got)
	}
	if tools := cl.tools(); !slices.Equal(tools, []string{"a__echo", "a__slow"}) {
		t.Errorf("tools under the new policy: %v", tools)
	}
	if got := text(t, cl.callTool(2, "a__pid", `{}`)); !strings.HasPrefix(got, "error -32602") {
		t.Errorf("a__pid under the new policy: %q, want -32602", got)
	}
}

// TestSetMembersRefused: members New would refuse are refused, and change
// nothing.
func TestSetMembersRefused(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	b.Prefix = "a"
	if err := e.SetMembers([]Member{a, b}); err == nil || !strings.Contains(err.Error(), `same prefix "a"`) {
		t.Fatalf("two members with one prefix: %v", err)
	}
	if err := e.SetMembers(nil); err == nil || !strings.Contains(err.Error(), "no servers") {
		t.Fatalf("no members: %v", err)
	}
	if got := text(t, cl.callTool(1, "a__echo", `{"message":"kept"}`)); got != "kept" {
		t.Errorf("a__echo after refused changes: %q", got)
	}
	e.Close()
	if err := e.SetMembers([]Member{a}); err == nil {
		t.Error("SetMembers on a closed endpoint: no error")
	}
}

// TestSetMembersStorm: members added and removed over and over while
// several sessions call every member: each call gets exactly one answer
// (its result, or an error naming the member removed or not yet joined),
// the sessions stay open and end up with the last members, and nothing is
// left running (the package's goleak).
func TestSetMembersStorm(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	c := fakeMember(t, "c", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a, b)
	const sessions, reloads = 4, 60
	clients := make([]*client, sessions)
	for i := range clients {
		clients[i] = connect(t, e, `{}`)
	}
	sets := [][]Member{{a}, {a, b, c}, {a, c}, {b}, {a, b}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var outs []*stream
	for s, cl := range clients {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				member := []string{"a", "b", "c"}[n%3]
				id := fmt.Sprintf("s%d-%d", s, n)
				out := newStream()
				mu.Lock()
				outs = append(outs, out)
				mu.Unlock()
				// Every other call lasts a while: in flight across reloads.
				call := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"%s__echo","arguments":{"message":%q}}}`, id, member, id)
				if n%2 == 1 {
					call = fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"%s__slow","arguments":{"ms":30}}}`, id, member)
				}
				cl.handle(call, out)
				var r []byte
				select {
				case r = <-out.replied:
				case <-time.After(wait):
					t.Errorf("%s: no reply", id)
					return
				}
				var m struct {
					ID    string `json:"id"`
					Error *struct {
						Message string `json:"message"`
					} `json:"error"`
				}
				switch err := json.Unmarshal(r, &m); {
				case err != nil || m.ID != id:
					t.Errorf("reply %s to %s", r, id)
				case m.Error == nil:
				case strings.Contains(m.Error.Message, `"`+member+`"`), strings.Contains(m.Error.Message, `"`+member+`__`):
				default:
					t.Errorf("%s to %s: %s, want its result or an error naming it", id, member, m.Error.Message)
				}
			}
		})
	}
	for n := range reloads {
		if err := e.SetMembers(sets[n%len(sets)]); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	for _, out := range outs {
		if n := out.replyCount(); n != 1 {
			t.Errorf("a call got %d replies", n)
		}
	}
	calls := len(outs)
	mu.Unlock()
	t.Logf("%d calls from %d sessions across %d reloads", calls, sessions, reloads)
	// The sessions are still there, and settle on the last members.
	if err := e.SetMembers([]Member{a, b, c}); err != nil {
		t.Fatal(err)
	}
	for i, cl := range clients {
		testkit.WaitFor(t, "c in every session", func() bool {
			return text(t, cl.callTool(1000+i, "c__echo", `{"message":"end"}`)) == "end"
		})
	}
}

// uncomparable is a Policy whose type == cannot compare.
type uncomparable struct{ tools []string }

func (p uncomparable) Allows(_ *auth.Principal, kind, name string, _ json.RawMessage) bool {
	return kind != "tool" || slices.Contains(p.tools, name)
}
func (p uncomparable) AllowsAll(_ *auth.Principal, kind string) bool { return kind != "tool" }

// TestIdentical: Backends and Policies are compared by identity, and a
// value == cannot compare counts as changed instead of panicking.
func TestIdentical(t *testing.T) {
	p1, p2 := &allowOnly{}, &allowOnly{}
	for _, tc := range []struct {
		a, b any
		want bool
	}{
		{nil, nil, true},
		{p1, p1, true},
		{p1, p2, false},
		{p1, nil, false},
		{nil, p1, false},
		{uncomparable{}, uncomparable{}, false},
		{p1, uncomparable{}, false},
	} {
		if got := identical(tc.a, tc.b); got != tc.want {
			t.Errorf("identical(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
