package eras

import (
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// Tests of when a reverse session answers resources/subscribe and
// resources/unsubscribe (reverse_listen.go): once the server acknowledged
// the listen asking for the new set. Answered before, an update sent
// between the answer and the acknowledgement reached no one: the server
// had no listen asking for it (a flaky TestPolicyFaultsSubResourceUpdateOf
// DeniedURI in internal/gateway lost its update so, once in about 40 runs).

const revAck = `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`

// revListening returns a session initialized on a server that takes
// subscriptions, its first listen acknowledged.
func revListening(t *testing.T, timeout time.Duration) (*revServer, *reverseConn) {
	t.Helper()
	srv := newRevServer(revDiscoverListen)
	c, _ := newRevConn(t, srv, timeout)
	revInit(t, c)
	srv.listen(t, 1).out.Send([]byte(revAck))
	return srv, c
}

func revSubscribe(c *reverseConn, id, uri string) *revStream {
	out := &revStream{}
	revHandle(c, `{"jsonrpc":"2.0","id":`+id+`,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`, out)
	return out
}

// TestReverseSubscribeAnsweredOnceListening: a subscribe is not answered
// while the listen asking for its URI is unacknowledged, and is once the
// server acknowledges it.
func TestReverseSubscribeAnsweredOnceListening(t *testing.T) {
	leaks := revLeaks(t)
	srv, c := revListening(t, time.Minute)
	out := revSubscribe(c, "1", "mem://a")
	l2 := srv.listen(t, 2)
	if n := out.replyCount(); n != 0 {
		t.Fatalf("subscribe answered before the server acknowledged the listen asking for mem://a (%d replies)", n)
	}
	l2.out.Send([]byte(revAck))
	if got := out.reply(t); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("subscribe: %s", got)
	}
	c.Close()
	leaks()
	if n := out.replyCount(); n != 1 {
		t.Errorf("%d replies, want 1", n)
	}
}

// TestReverseSubscribeWaitsForTheNewestListen: two subscribes in a row;
// the first one's listen, replaced by the second's before it was
// acknowledged, settles nothing even when its acknowledgement comes late:
// both are answered once the listen asking for both URIs is acknowledged.
func TestReverseSubscribeWaitsForTheNewestListen(t *testing.T) {
	leaks := revLeaks(t)
	srv, c := revListening(t, time.Minute)
	a := revSubscribe(c, "1", "mem://a")
	l2 := srv.listen(t, 2)
	b := revSubscribe(c, "2", "mem://b")
	l3 := srv.listen(t, 3)
	l2.out.Send([]byte(revAck)) // late: l2 is cancelled already
	if na, nb := a.replyCount(), b.replyCount(); na != 0 || nb != 0 {
		t.Fatalf("answered on the acknowledgement of a replaced listen: %d, %d replies", na, nb)
	}
	l3.out.Send([]byte(revAck))
	if got := a.reply(t); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("first subscribe: %s", got)
	}
	if got := b.reply(t); got != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Errorf("second subscribe: %s", got)
	}
	c.Close()
	leaks()
}

// TestReverseSubscribeListenRefused: a server that ends the listen
// without acknowledging it (an error) does not hold the subscribe through
// the renewal's backoff: it is answered, and the listen renewed.
func TestReverseSubscribeListenRefused(t *testing.T) {
	leaks := revLeaks(t)
	srv, c := revListening(t, time.Minute)
	out := revSubscribe(c, "1", "mem://a")
	l2 := srv.listen(t, 2)
	l2.out.Reply([]byte(`{"jsonrpc":"2.0","id":` + string(l2.id) + `,"error":{"code":-32603,"message":"busy"}}`))
	if got := out.reply(t); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("subscribe: %s", got)
	}
	if got := string(srv.listen(t, 3).params(t)["notifications"]); got != `{"toolsListChanged":true,"resourceSubscriptions":["mem://a"]}` {
		t.Errorf("renewed listen asks for %s", got)
	}
	c.Close()
	leaks()
}

// TestReverseSubscribeWaitEnds: a subscribe waiting for its listen ends
// like any request of the session: its client's cancellation (no answer,
// none after the acknowledgement either), Close (an error), the request
// timeout (answered: the URI is recorded and asked for; only the
// server's acknowledgement is late).
func TestReverseSubscribeWaitEnds(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		leaks := revLeaks(t)
		srv, c := revListening(t, time.Minute)
		out := revSubscribe(c, `"s"`, "mem://a")
		l2 := srv.listen(t, 2)
		revHandle(c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s"}}`, nil)
		if got := out.reply(t); got != "" {
			t.Errorf("cancelled subscribe answered %s", got)
		}
		l2.out.Send([]byte(revAck))
		c.Close()
		leaks()
		if n := out.replyCount(); n != 1 {
			t.Errorf("%d replies, want 1 (the end without an answer)", n)
		}
	})
	t.Run("close", func(t *testing.T) {
		leaks := revLeaks(t)
		srv, c := revListening(t, time.Minute)
		out := revSubscribe(c, "1", "mem://a")
		srv.listen(t, 2)
		c.CloseWith("the client deleted the session")
		_, replies := out.got()
		if len(replies) != 1 {
			t.Fatalf("after Close: %q", replies)
		}
		revWantError(t, replies[0], "1", protocol.CodeServerError, "the client deleted the session")
		leaks()
	})
	t.Run("timeout", func(t *testing.T) {
		leaks := revLeaks(t)
		// The timeout bounds the initialize too: 1 ms failed it on a busy
		// machine. The listen is never acknowledged, so any timeout ends it.
		srv, c := revListening(t, time.Second)
		out := revSubscribe(c, "1", "mem://a")
		if got := out.reply(t); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
			t.Errorf("subscribe: %s", got)
		}
		if got := string(srv.listen(t, 2).params(t)["notifications"]); got != `{"toolsListChanged":true,"resourceSubscriptions":["mem://a"]}` {
			t.Errorf("listen asks for %s", got)
		}
		c.Close()
		leaks()
	})
}
