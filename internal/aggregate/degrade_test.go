package aggregate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/servers"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestServerRequestsRoutedBack: two members ask the client for sampling
// at the same time, with the same ids of their own; each answer goes back
// to the member that asked.
func TestServerRequestsRoutedBack(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{"sampling":{}}`)
	cl.tools() // both members' sessions now made the same requests

	sa := cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__sample","arguments":{"prompt":"pa"}}}`)
	sb := cl.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b__sample","arguments":{"prompt":"pb"}}}`)
	type asked struct{ id, prompt string }
	read := func(s *stream) asked {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Messages []struct {
					Content struct{ Text string } `json:"content"`
				} `json:"messages"`
			} `json:"params"`
		}
		if err := json.Unmarshal(s.next(t), &req); err != nil || req.Method != "sampling/createMessage" || len(req.Params.Messages) != 1 {
			t.Fatalf("server request %+v (%v)", req, err)
		}
		return asked{string(req.ID), req.Params.Messages[0].Content.Text}
	}
	ra, rb := read(sa), read(sb)
	if ra.prompt != "pa" || rb.prompt != "pb" || ra.id == rb.id {
		t.Fatalf("server requests %+v and %+v: want each on its call's stream, with distinct ids", ra, rb)
	}
	// The members numbered them alike: only the endpoint's ids tell them apart.
	_, _, ida, _ := decodeServerID([]byte(ra.id), 2)
	_, _, idb, _ := decodeServerID([]byte(rb.id), 2)
	t.Logf("ids %s and %s, the members' own %s and %s", ra.id, rb.id, ida, idb)
	if len(ida) == 0 || string(ida) != string(idb) {
		t.Errorf("the members' own ids %s and %s: the test means them to collide", ida, idb)
	}
	// Answer b first, then a.
	for _, r := range []asked{rb, ra} {
		cl.handle(`{"jsonrpc":"2.0","id":`+r.id+`,"result":{"role":"assistant","content":{"type":"text","text":"answer to `+r.prompt+`"},"model":"m"}}`, nil)
	}
	if got := text(t, sa.reply(t)); got != "answer to pa" {
		t.Errorf("a__sample: %q", got)
	}
	if got := text(t, sb.reply(t)); got != "answer to pb" {
		t.Errorf("b__sample: %q", got)
	}
}

// hold holds a fake member down (see testkit.CatalogOptions.DownFile)
// until release is called.
func hold(t *testing.T, path string) (release func()) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMemberDownAndBack: a member killed and held down (each restart
// fails) leaves the lists (list_changed), its tools answer at once naming
// it and its state, the other member keeps working; back, it rejoins
// (list_changed) and serves.
func TestMemberDownAndBack(t *testing.T) {
	mb, down := marker(t, "b"), filepath.Join(t.TempDir(), "down")
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{Marker: mb, Catalog: testkit.CatalogOptions{DownFile: down}})
	if b.State == nil {
		t.Skip("the backend does not report its readiness")
	}
	e := newEndpoint(t, Options{PollInterval: 5 * time.Millisecond}, a, b)
	cl := connect(t, e, `{}`)
	if n := len(cl.tools()); n != 2*builtinTools {
		t.Fatalf("%d tools before", n)
	}
	pids := testkit.Procs(mb)
	if len(pids) != 1 {
		t.Fatalf("b's processes: %v", pids)
	}

	release := hold(t, down)
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	names := cl.tools()
	if len(names) != builtinTools || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "b__") }) {
		t.Errorf("tools while b is down: %v, want a's only", names)
	}
	start := time.Now()
	got := text(t, cl.callTool(1, "b__echo", `{"message":"x"}`))
	if !strings.Contains(got, "-32000") || !strings.Contains(got, `server "b" is not available: backing off`) {
		t.Errorf("call to a down member: %q, want an error naming it and its state", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the error took %v: it must come at once", d)
	}
	if got := text(t, cl.callTool(2, "a__echo", `{"message":"still"}`)); got != "still" {
		t.Errorf("a while b is down: %q", got)
	}

	release()
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	if n := len(cl.tools()); n != 2*builtinTools {
		t.Errorf("%d tools after b came back, want %d", n, 2*builtinTools)
	}
	if got := text(t, cl.callTool(3, "b__echo", `{"message":"back"}`)); got != "back" {
		t.Errorf("b__echo after b came back: %q", got)
	}
}

// TestMemberDownAtInitialize: a member down when the client initializes is
// hidden, and initialized for the session when it comes up (with the
// client's initialized and logging level): the client hears list_changed
// and can call it.
func TestMemberDownAtInitialize(t *testing.T) {
	down := filepath.Join(t.TempDir(), "down")
	release := hold(t, down)
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{Catalog: testkit.CatalogOptions{DownFile: down}})
	if b.State == nil {
		t.Skip("the backend does not report its readiness")
	}
	e := newEndpoint(t, Options{PollInterval: 5 * time.Millisecond}, a, b)
	cl := connect(t, e, `{}`)
	cl.result(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)
	if n := len(cl.tools()); n != builtinTools {
		t.Fatalf("%d tools with b down, want a's %d", n, builtinTools)
	}
	if got := text(t, cl.callTool(2, "b__echo", `{}`)); !strings.Contains(got, `server "b" is not available`) {
		t.Errorf("call to b while down: %q", got)
	}
	release()
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	if n := len(cl.tools()); n != 2*builtinTools {
		t.Errorf("%d tools once b is up", n)
	}
	if got := text(t, cl.callTool(3, "b__initialized", `{}`)); got != "true" {
		t.Errorf("b initialized: %q", got)
	}
	testkit.WaitFor(t, "b at the client's level", func() bool {
		return text(t, cl.callTool(4, "b__level", `{}`)) == "debug"
	})
}

// TestCriticalMemberFailsInitialize: a critical member that cannot start
// fails the client's initialize, naming it; a member that is not critical
// is only hidden.
func TestCriticalMemberFailsInitialize(t *testing.T) {
	g := config.Defaults()
	cfg := g.NewServer("broken")
	cfg.Command = "mcpgate-test-no-such-command"
	log, _ := newLog(t)
	srv, err := servers.New(cfg, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	a := fakeMember(t, "a", testkit.FakeOptions{})
	for _, critical := range []bool{false, true} {
		broken := Member{Name: "broken", Prefix: "broken", Backend: srv, Critical: critical}
		e := newEndpoint(t, Options{}, a, broken)
		general := newStream()
		c, err := e.Open(t.Context(), general)
		if err != nil {
			t.Fatal(err)
		}
		cl := &client{t: t, conn: c, general: general}
		r := string(cl.do(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		c.Close()
		if critical {
			if !strings.Contains(r, `"error"`) || !strings.Contains(r, `server \"broken\", critical`) || !strings.Contains(r, "command not found") {
				t.Errorf("initialize with a critical member down: %s, want an error naming it and why", r)
			}
			continue
		}
		if !strings.Contains(r, `"result"`) {
			t.Errorf("initialize with a member down: %s, want a result", r)
		}
	}
}

// TestSlowMemberLeftOut: a member slower than its timeout is left out of a
// merged list after its timeout, never delaying it beyond; a call to its
// tools says why.
func TestSlowMemberLeftOut(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ListDelay: time.Hour}})
	b.Timeout = 300 * time.Millisecond
	waitReady(t, a, b) // the timeout bounds a start too: the test is of the list
	log, logs := newLog(t)
	e := newEndpoint(t, Options{Logger: log}, a, b)
	cl := connect(t, e, `{}`)
	start := time.Now()
	names := cl.tools()
	d := time.Since(start)
	if len(names) != builtinTools || !strings.HasPrefix(names[0], "a__") {
		t.Errorf("tools %v, want a's only", names)
	}
	if d > 5*time.Second {
		t.Errorf("the list took %v with a member timing out after %v", d, b.Timeout)
	}
	if !strings.Contains(logs.String(), "left out of a merged list") {
		t.Errorf("log %s: want a line about the slow member", logs.String())
	}
	got := text(t, cl.callTool(1, "b__echo", `{}`))
	if !strings.Contains(got, `server "b" did not list its tools`) || !strings.Contains(got, "300ms") {
		t.Errorf("call to the slow member's tool: %q", got)
	}
}

// TestMemberTimeoutAnswersCall: a call to a member that does not answer
// within its Timeout gets -32001, and is cancelled at the member.
func TestMemberTimeoutAnswersCall(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	a.Timeout = 2 * time.Second // the listing and the probes below must fit in it on a busy machine
	waitReady(t, a)             // the timeout bounds a start too: the test is of the call
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	cl.tools()
	got := text(t, cl.callTool(7, "a__slow", `{"ms":3600000}`))
	if !strings.Contains(got, "-32001") || !strings.Contains(got, `server "a" did not answer within 2s`) {
		t.Errorf("slow call: %q", got)
	}
	testkit.WaitFor(t, "the call cancelled at the member", func() bool {
		return cancelledAt(t, cl) == 1
	})
}

// TestCloseAnswersInFlight: ending the session answers every request in
// flight once (calls at members, a list waiting for a slow member, a call
// waiting for names), and nothing after.
func TestCloseAnswersInFlight(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	slow := fakeMember(t, "slow", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ListDelay: time.Hour}})
	e := newEndpoint(t, Options{}, a, slow)
	cl := connect(t, e, `{}`)
	var streams []*stream
	streams = append(streams,
		cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),                                                        // waits for slow
		cl.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a__slow","arguments":{"ms":3600000}}}`), // waits for names
		cl.send(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"mem://a"}}`),
	)
	if n := e.Pending(); n < 2 {
		t.Errorf("Pending %d with requests in flight", n)
	}
	cl.conn.CloseWith("the client deleted the session")
	cl.conn.Close()
	for j, s := range streams {
		r := string(s.reply(t))
		if j < 2 && (!strings.Contains(r, `"error"`) || !strings.Contains(r, "the client deleted the session")) {
			t.Errorf("request %d: %s, want an error saying why", j+1, r)
		}
	}
	if r := cl.do(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`); !strings.Contains(string(r), "the client deleted the session") {
		t.Errorf("request after Close: %s", r)
	}
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
	for j, s := range streams {
		if n := s.replyCount(); n != 1 {
			t.Errorf("request %d got %d replies", j+1, n)
		}
	}
}

// TestCancelAndAbandon: a client's cancellation ends its request at the
// member without a reply; an abandoned stream's requests end silently.
func TestCancelAndAbandon(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	cl.tools()
	s := cl.send(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"a__slow","arguments":{"ms":3600000,"started":true},"_meta":{"progressToken":"tok"}}}`)
	if p := string(s.next(t)); !strings.Contains(p, `"progressToken":"tok"`) {
		t.Errorf("progress %s, want the client's token", p)
	}
	cl.handle(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1"}}`, nil)
	if r := s.reply(t); r != nil {
		t.Errorf("cancelled request answered %s, want nil (no reply)", r)
	}
	s2 := cl.send(`{"jsonrpc":"2.0","id":"c2","method":"tools/call","params":{"name":"a__slow","arguments":{"ms":3600000}}}`)
	cl.conn.Abandon(s2)
	testkit.WaitFor(t, "both cancelled at the member", func() bool {
		return cancelledAt(t, cl) == 2
	})
	if n := s2.replyCount(); n != 0 {
		t.Errorf("abandoned request got %d replies", n)
	}
	if n := e.Pending(); n != 0 {
		t.Errorf("Pending %d", n)
	}
}

// TestNewRejects: what is wrong in the configuration fails New, naming it.
func TestNewRejects(t *testing.T) {
	a := Member{Name: "a", Prefix: "x", Backend: nopBackend{}}
	b := Member{Name: "b", Prefix: "x", Backend: nopBackend{}}
	for _, tc := range []struct {
		opts    Options
		members []Member
		want    string
	}{
		{Options{Name: "e"}, []Member{a, b}, `servers "a" and "b" have the same prefix "x"`},
		{Options{Name: "e"}, []Member{a, {Name: "a", Backend: nopBackend{}}}, `server "a" is listed twice`},
		{Options{Name: "e", Filter: Filter{Tools: Globs{Deny: []string{"[a-"}}}}, []Member{a}, `endpoint "e": tools.deny[0]: "[a-"`},
		{Options{Name: "e"}, []Member{{Name: "c", Backend: nopBackend{}, Filter: Filter{Resources: Globs{Allow: []string{"ok", "\\"}}}}}, `server "c": resources.allow[1]`},
		{Options{Name: "e", MaxNameLen: 10}, []Member{a}, "MaxNameLen 10"},
		{Options{Name: "e"}, nil, "no servers"},
	} {
		_, err := New(tc.opts, tc.members)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, want an error with %q", err, tc.want)
		}
	}
	a.Prefix, b.Prefix = "", ""
	e, err := New(Options{}, []Member{a, b})
	if err != nil {
		t.Errorf("two members without prefixes: %v", err)
	} else {
		e.Close()
	}
}

// cancelledAt returns how many requests the fake member "a" saw cancelled.
func cancelledAt(t *testing.T, cl *client) int {
	var ids []json.RawMessage
	if err := json.Unmarshal([]byte(text(t, cl.callTool(99, "a__cancelled", `{}`))), &ids); err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// TestEndpointCloseEndsSessions: closing the endpoint ends the sessions
// still open, answering their requests in flight.
func TestEndpointCloseEndsSessions(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	cl.tools()
	s := cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__slow","arguments":{"ms":3600000}}}`)
	e.Close()
	if r := string(s.reply(t)); !strings.Contains(r, "the gateway is shutting down") {
		t.Errorf("call in flight at Close: %s", r)
	}
	if _, err := e.Open(t.Context(), newStream()); err == nil {
		t.Error("Open after Close succeeded")
	}
}
