package eras

// Attacks on a reverse-bridge session's listen: what its subscriptions
// ask of the server, and a listen racing the session's end.

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestReverseSubscribeRenewsListen: the session's listen follows its
// subscriptions (the old one abandoned, the new one's filter with the
// URIs; a change answered once the new one is acknowledged), is renewed
// after the server ends it, forwards notifications but not its
// acknowledgement, and ends with Close.
func TestReverseSubscribeRenewsListen(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverListen)
	c, general := newRevConn(t, srv, time.Minute)
	local := func(raw, want string) {
		t.Helper()
		out := &revStream{}
		revHandle(c, raw, out)
		if _, replies := out.got(); len(replies) != 1 || replies[0] != want {
			t.Fatalf("%s: replies %q, want %s", raw, replies, want)
		}
	}
	// A change of the set is answered once the listen asking for the new
	// set is acknowledged (ack, which the test calls after its checks).
	changed := func(raw string, l func() *revAttempt, want string) *revAttempt {
		t.Helper()
		out := &revStream{}
		revHandle(c, raw, out)
		a := l()
		if n := out.replyCount(); n != 0 {
			t.Fatalf("%s: answered before its listen was acknowledged", raw)
		}
		a.out.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`))
		if got := out.reply(t); got != want || out.replyCount() != 1 {
			t.Fatalf("%s: replies %q, want %s", raw, got, want)
		}
		return a
	}
	// Before initialize: recorded, no listen (nothing to know the filter by).
	local(`{"jsonrpc":"2.0","id":"s0","method":"resources/subscribe","params":{"uri":"file:///early"}}`, `{"jsonrpc":"2.0","id":"s0","result":{}}`)
	revInit(t, c)
	filter := func(a *revAttempt) string {
		t.Helper()
		var f struct {
			Notifications json.RawMessage `json:"notifications"`
		}
		if err := json.Unmarshal(a.params(t)["notifications"], &f.Notifications); err != nil {
			t.Fatal(err)
		}
		return string(f.Notifications)
	}
	l1 := srv.listen(t, 1)
	if got := filter(l1); got != `{"toolsListChanged":true,"resourceSubscriptions":["file:///early"]}` {
		t.Errorf("listen 1 filter %s", got)
	}
	m := l1.meta(t)
	if string(m["io.modelcontextprotocol/clientInfo"]) != `{"name":"attacker","version":"9"}` || string(m["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"` {
		t.Errorf("listen _meta %v", m)
	}
	l1.out.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`))
	l1.out.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	l1.out.Send([]byte(`{"jsonrpc":"2.0","id":5,"method":"roots/list"}`)) // not a notification
	testkit.WaitFor(t, "list_changed forwarded", func() bool { s, _ := general.got(); return len(s) == 1 })

	l2 := changed(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///a"}}`, func() *revAttempt {
		if l1.ctx.Err() == nil {
			t.Error("the old listen's context is not ended at once")
		}
		testkit.WaitFor(t, "listen 1 abandoned and closed", l1.done)
		l2 := srv.listen(t, 2)
		if got := filter(l2); got != `{"toolsListChanged":true,"resourceSubscriptions":["file:///a","file:///early"]}` {
			t.Errorf("listen 2 filter %s", got)
		}
		return l2
	}, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	// The same URI again: nothing to renew.
	local(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"file:///a"}}`, `{"jsonrpc":"2.0","id":2,"result":{}}`)
	if l2.ctx.Err() != nil {
		t.Error("a subscription already held renewed the listen")
	}
	local(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{}}`, string(jsonrpc.ErrorResponse([]byte("3"), protocol.CodeInvalidParams, "mcpgate: resources/subscribe needs params.uri, a string")))
	l3 := changed(`{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"file:///a"}}`, func() *revAttempt {
		testkit.WaitFor(t, "listen 2 abandoned", l2.done)
		l3 := srv.listen(t, 3)
		if got := filter(l3); got != `{"toolsListChanged":true,"resourceSubscriptions":["file:///early"]}` {
			t.Errorf("listen 3 filter %s", got)
		}
		return l3
	}, `{"jsonrpc":"2.0","id":4,"result":{}}`)
	l3.out.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///early"}}`))
	// The server ends the listen (a restart), saying so as a 2026-07-28
	// server does: notifications/cancelled naming the listen, no result.
	// That is the gateway's own business, not the client's; the listen is
	// renewed after the backoff.
	l3.out.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(l3.id) + `,"reason":"restart"}}`))
	l3.out.Reply(nil)
	l4 := srv.listen(t, 4)
	if filter(l4) != filter(l3) {
		t.Errorf("renewed listen's filter %s", filter(l4))
	}
	if l4.sc == l3.sc || !l3.sc.closed.Load() {
		t.Error("the renewed listen does not have a connection of its own")
	}
	c.Close()
	testkit.WaitFor(t, "the listen abandoned by Close", l4.done)
	leaks()
	sends, replies := general.got()
	want := []string{`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///early"}}`}
	if !slices.Equal(sends, want) || len(replies) != 0 {
		t.Errorf("general stream: %q %q", sends, replies)
	}
	if _, n := srv.count(); n != 4 {
		t.Errorf("%d listens, want 4", n)
	}
	if n, _ := srv.count(); n != 0 {
		t.Errorf("%d requests went up for local methods", n)
	}
}

// TestReverseListenOpenRacesClose: a listen whose connection opens only
// after the session closed (or renewed it) never reaches the server; the
// subscribe waiting for it is answered by Close.
func TestReverseListenOpenRacesClose(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverListen)
	c, _ := newRevConn(t, srv, time.Minute)
	revInit(t, c)
	l1 := srv.listen(t, 1)
	gate := make(chan struct{})
	srv.mu.Lock()
	srv.openGate = gate
	srv.mu.Unlock()
	out := &revStream{}
	revHandle(c, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///a"}}`, out)
	testkit.WaitFor(t, "the new listen's open", func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.opened == 3 })
	testkit.WaitFor(t, "the old listen abandoned", l1.done)
	if n := out.replyCount(); n != 0 {
		t.Fatalf("subscribe answered before its listen opened: %d replies", n)
	}
	c.Close()
	if _, replies := out.got(); len(replies) != 1 {
		t.Fatalf("subscribe: %q", replies)
	} else {
		revWantError(t, replies[0], "1", protocol.CodeServerError, "session closed")
	}
	close(gate)
	leaks()
	if _, n := srv.count(); n != 1 {
		t.Errorf("%d listens reached the server, want 1 (a listen opened after Close went up)", n)
	}
}
