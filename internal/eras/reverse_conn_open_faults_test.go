package eras

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attacks on the reverse bridge's opening and initialize: open and
// ServerInit failing or hanging, Close during initialize. The harness is in
// reverse_faults_test.go.

// TestReverseOpenAndInitFail: a failing open, ServerInit or discover is
// one error to the request or initialize that needed it; the session's
// version stays unset; an open that hangs does not hold Close.
func TestReverseOpenAndInitFail(t *testing.T) {
	t.Run("open fails", func(t *testing.T) {
		leaks := revLeaks(t)
		srv := newRevServer(revDiscoverPlain)
		c, _ := newRevConn(t, srv, time.Minute)
		revInit(t, c)
		srv.mu.Lock()
		srv.openErr = errors.New("mcpgate: server x is backing off: boom")
		srv.mu.Unlock()
		out := &revStream{}
		revHandle(c, revCall(`"o"`, 1), out)
		revWantError(t, out.reply(t), `"o"`, protocol.CodeServerError, "boom")
		init := &revStream{}
		revHandle(c, strings.Replace(revInitialize, `"id":0`, `"id":"i"`, 1), init)
		revWantError(t, init.reply(t), `"i"`, protocol.CodeServerError, "boom")
		leaks()
		if out.replyCount()+init.replyCount() != 2 {
			t.Error("more than one reply")
		}
		c.Close()
	})
	for name, tweak := range map[string]func(*revServer){
		"ServerInit fails": func(s *revServer) { s.initErr = errors.New("mcpgate: not ready: boom") },
		"bad discover":     func(s *revServer) { s.discover = []byte(`{"capabilities":[]}`) },
	} {
		t.Run(name, func(t *testing.T) {
			leaks := revLeaks(t)
			srv := newRevServer(revDiscoverListen)
			tweak(srv)
			c, _ := newRevConn(t, srv, time.Minute)
			out := &revStream{}
			revHandle(c, revInitialize, out)
			reply := out.reply(t)
			if a := revParse(t, reply); a.code == 0 || string(a.id) != "0" {
				t.Fatalf("initialize: %s", reply)
			}
			if v := c.Version(); v != "" {
				t.Errorf("version %q after a failed initialize", v)
			}
			srv.mu.Lock()
			conns := slices.Clone(srv.conns)
			srv.mu.Unlock()
			if len(conns) != 1 || !conns[0].closed.Load() {
				t.Errorf("initialize's connection left open (%d opened)", len(conns))
			}
			c.Close()
			leaks()
			if _, listens := srv.count(); listens != 0 {
				t.Errorf("%d listens after a failed initialize", listens)
			}
		})
	}
	t.Run("open hangs", func(t *testing.T) {
		leaks := revLeaks(t)
		srv := newRevServer(revDiscoverPlain)
		c, _ := newRevConn(t, srv, time.Minute)
		revInit(t, c)
		gate := make(chan struct{})
		srv.mu.Lock()
		srv.openGate = gate
		srv.mu.Unlock()
		out := &revStream{}
		revHandle(c, revCall("3", 1), out)
		testkit.WaitFor(t, "open called", func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.opened == 2 })
		c.CloseWith("bye")
		if _, replies := out.got(); len(replies) != 1 {
			t.Fatalf("%d replies when CloseWith returned", len(replies))
		} else {
			revWantError(t, replies[0], "3", protocol.CodeServerError, "bye")
		}
		close(gate)
		leaks()
		if n := out.replyCount(); n != 1 {
			t.Errorf("%d replies", n)
		}
		if n, _ := srv.count(); n != 0 {
			t.Errorf("a request went up after Close: %d attempts", n)
		}
	})
}

// TestReverseCloseDuringInitialize: an initialize waiting on the server
// (ServerInit of a server still starting) is an request in flight like any
// other: Close answers it with an error before it returns, Handle returns
// without waiting on the server, and the session gets no version.
func TestReverseCloseDuringInitialize(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverListen)
	srv.initBlock = true
	c, _ := newRevConn(t, srv, time.Minute)
	out := &revStream{}
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		revHandle(c, revInitialize, out)
	}()
	testkit.WaitFor(t, "ServerInit called", func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.inits == 1 })
	// A client may not cancel its initialize: this ends nothing.
	revHandle(c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}}`, nil)
	if n := out.replyCount(); n != 0 {
		t.Fatalf("notifications/cancelled ended initialize: %d replies", n)
	}
	c.CloseWith("the gateway is shutting down")
	if _, replies := out.got(); len(replies) != 1 {
		t.Errorf("%d replies to initialize when CloseWith returned, want 1", len(replies))
	}
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Handle(initialize) still waits on the server after Close")
	}
	revWantError(t, out.reply(t), "0", protocol.CodeServerError, "shutting down")
	if n := out.replyCount(); n != 1 {
		t.Errorf("%d replies", n)
	}
	if v := c.Version(); v != "" {
		t.Errorf("version %q after initialize failed by Close", v)
	}
	leaks()
	if _, listens := srv.count(); listens != 0 {
		t.Errorf("%d listens on a closed session", listens)
	}
}

// TestReverseInitializeTimesOut: an initialize waiting on a server that
// never becomes ready ends with the request timeout, one error.
func TestReverseInitializeTimesOut(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverPlain)
	srv.initBlock = true
	c, _ := newRevConn(t, srv, 200*time.Millisecond)
	out := &revStream{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		revHandle(c, revInitialize, out)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("initialize on a server that is never ready is not bounded by the timeout")
	}
	revWantError(t, out.reply(t), "0", protocol.CodeServerError, "initialize timed out")
	if v := c.Version(); v != "" {
		t.Errorf("version %q", v)
	}
	c.Close()
	if n := out.replyCount(); n != 1 {
		t.Errorf("%d replies", n)
	}
	leaks()
}
