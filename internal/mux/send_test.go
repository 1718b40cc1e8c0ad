package mux

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// prompt bounds how long a path that must not wait on the server may take.
// It is far below every timeout in these tests, so a path that waited for
// the stuck server would overrun it by seconds.
const prompt = 2 * time.Second

// within fails the test unless f returns within prompt.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(prompt):
		t.Fatalf("%s blocked on a stuck server", what)
	}
	t.Logf("%s took %v", what, time.Since(start))
}

// TestStuckServerTimeoutFiresOnTime: a server that stops reading stdin
// (Send blocks until its ctx ends, TrySend fails) still lets the request
// time out on time, with one -32001 answer; the best-effort cancellation is
// dropped and counted instead of blocking the timer.
// In a synctest bubble, so that the bound is read on a clock only timers
// move: a busy machine cannot stretch it, a path waiting on a timer does.
func TestStuckServerTimeoutFiresOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 300 * time.Millisecond
		m, up := startShared(t, Options{Timeout: timeout})
		up.stuck.Store(true)
		out := newRec()
		c := m.Join(out)
		start := time.Now()
		handled := make(chan struct{})
		go func() {
			defer close(handled)
			c.Handle(context.Background(), request(t, `"a"`, "tools/call", `{}`), out)
		}()
		replies := out.waitReplies(t, 1)
		if elapsed := time.Since(start); elapsed > timeout+prompt {
			t.Fatalf("timed out after %v, want about %v", elapsed, timeout)
		}
		code, _, isErr := errorCode(t, replies[0])
		if !isErr || code != protocol.CodeRequestTimeout {
			t.Fatalf("reply %s, want a -32001 timeout", replies[0])
		}
		select {
		case <-handled:
		case <-time.After(prompt):
			t.Fatal("Handle still blocked after the request's deadline")
		}
		within(t, "Mux.Close", m.Close)
		if got := out.waitReplies(t, 1); len(got) != 1 {
			t.Fatalf("%d replies for one request", len(got))
		}
		if m.Stats().TimedOut != 1 {
			t.Fatalf("timed out %d, want 1", m.Stats().TimedOut)
		}
	})
}

// TestStuckServerReaderAndTeardownDoNotBlock: with the server stuck, the
// reader's paths (answering the server's ping, a reply that frees a
// maxInFlight slot for a queued request), Client.Close and Mux.Close all
// return at once; the queued request still gets exactly one answer.
func TestStuckServerReaderAndTeardownDoNotBlock(t *testing.T) {
	m, up := startShared(t, Options{Timeout: time.Minute, MaxInFlight: 1})
	out := newRec()
	c := m.Join(out)
	c.Handle(context.Background(), request(t, `"a"`, "tools/call", `{}`), out) // written
	var aID string
	up.waitFor(t, "the first call written", func() bool {
		if w := up.writtenLocked("tools/call"); len(w) == 1 {
			aID = string(w[0].Bytes(w[0].ID))
			return true
		}
		return false
	})
	up.stuck.Store(true)
	within(t, "a queued request", func() {
		c.Handle(context.Background(), request(t, `"b"`, "tools/call", `{}`), out)
	})
	within(t, "Line with the reply that frees the slot", func() {
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+aID+`,"result":{}}`))
	})
	if r := out.waitReplies(t, 1); strings.Contains(string(r[0]), "error") {
		t.Fatalf("first reply %s", r[0])
	}
	dropped := m.Stats().DroppedSends
	within(t, "Line with a server ping", func() {
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":"p1","method":"ping"}`))
	})
	if m.Stats().DroppedSends != dropped+1 {
		t.Fatalf("dropped sends %d, want %d", m.Stats().DroppedSends, dropped+1)
	}
	within(t, "Client.Close", c.Close)
	replies := out.waitReplies(t, 2)
	if code, text, isErr := errorCode(t, replies[1]); !isErr || code != protocol.CodeServerError || !strings.Contains(text, "session closed") {
		t.Fatalf("queued request answered %s, want a session-closed error", replies[1])
	}
	within(t, "Mux.Close", m.Close)
	if got := out.waitReplies(t, 2); len(got) != 2 {
		t.Fatalf("%d replies for two requests", len(got))
	}
}

// TestQueuedWriteBoundedByDeadline: a queued request released while the
// server is stuck is written by a goroutine bounded by its deadline; it
// then gets one timeout answer.
func TestQueuedWriteBoundedByDeadline(t *testing.T) {
	m, up := startShared(t, Options{Timeout: 400 * time.Millisecond, MaxInFlight: 1})
	out := newRec()
	c := m.Join(out)
	c.Handle(context.Background(), request(t, `"a"`, "tools/call", `{}`), out)
	var aID string
	up.waitFor(t, "the first call written", func() bool {
		if w := up.writtenLocked("tools/call"); len(w) == 1 {
			aID = string(w[0].Bytes(w[0].ID))
			return true
		}
		return false
	})
	up.stuck.Store(true)
	c.Handle(context.Background(), request(t, `"b"`, "tools/call", `{}`), out)
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+aID+`,"result":{}}`))
	replies := out.waitReplies(t, 2)
	if code, _, isErr := errorCode(t, replies[1]); !isErr || code != protocol.CodeRequestTimeout {
		t.Fatalf("released request answered %s, want a timeout", replies[1])
	}
	m.Close()
	if got := out.waitReplies(t, 2); len(got) != 2 {
		t.Fatalf("%d replies for two requests", len(got))
	}
}
