package mux

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file tests that a request answered by someone else (its client's
// cancellation, Client.Close, the process's exit) stops waiting to be
// written and is never written afterwards.

// blockedSends waits until n Sends are blocked on the stuck fake.
func blockedSends(t *testing.T, up *fakeUp, n int32) {
	t.Helper()
	up.waitFor(t, "blocked sends", func() bool { return up.blocked.Load() == n })
}

// numWritten counts the messages with method the fake took.
func numWritten(up *fakeUp, method string) int {
	up.mu.Lock()
	defer up.mu.Unlock()
	return len(up.writtenLocked(method))
}

// queueBehindStuck returns a Mux (MaxInFlight 1) whose client has request
// "b" released from the queue while the server is stuck, so that the Mux's
// writer goroutine waits to write it.
func queueBehindStuck(t *testing.T) (*Mux, *fakeUp, *Client, *rec) {
	t.Helper()
	m, up := startShared(t, Options{Timeout: time.Minute, MaxInFlight: 1})
	out := newRec()
	c := m.Join(out)
	c.Handle(context.Background(), request(t, `"a"`, "tools/call", `{}`), out)
	aID := writtenID(t, up, "tools/call", 0)
	up.stuck.Store(true)
	c.Handle(context.Background(), request(t, `"b"`, "tools/call", `{}`), out)
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+aID+`,"result":{}}`))
	blockedSends(t, up, 1)
	return m, up, c, out
}

// TestCancelledQueuedWriteStops: a request released from the queue while
// the server is stuck, then cancelled by its client, stops waiting for the
// server at once, and is not written when the server reads again.
func TestCancelledQueuedWriteStops(t *testing.T) {
	m, up, c, out := queueBehindStuck(t)
	c.Handle(context.Background(), notification(t, "notifications/cancelled", `{"requestId":"b"}`), nil)
	if r := out.waitReplies(t, 2); r[1] != nil {
		t.Fatalf("cancelled request answered %s", r[1])
	}
	blockedSends(t, up, 0)
	up.unstick()
	m.Close() // waits for the Mux's writers
	if n := numWritten(up, "tools/call"); n != 1 {
		t.Fatalf("%d tools/call written, want 1: the cancelled one went out", n)
	}
}

// TestClosedSessionQueuedWriteStops: the same after Client.Close.
func TestClosedSessionQueuedWriteStops(t *testing.T) {
	m, up, c, out := queueBehindStuck(t)
	c.Close()
	if _, text, isErr := errorCode(t, out.waitReplies(t, 2)[1]); !isErr || !strings.Contains(text, "session closed") {
		t.Fatalf("queued request answered %s", out.waitReplies(t, 2)[1])
	}
	blockedSends(t, up, 0)
	up.unstick()
	m.Close()
	if n := numWritten(up, "tools/call"); n != 1 {
		t.Fatalf("%d tools/call written, want 1: one of a closed session went out", n)
	}
}

// TestClosedSessionHandleReturns: a request whose own goroutine waits for
// room in the stuck server's queue returns as soon as Client.Close answered
// it (the HTTP layer waits for it), and is never written.
func TestClosedSessionHandleReturns(t *testing.T) {
	m, up := startShared(t, Options{Timeout: time.Minute})
	out := newRec()
	c := m.Join(out)
	up.stuck.Store(true)
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		c.Handle(context.Background(), request(t, `"b"`, "tools/call", `{}`), out)
	}()
	blockedSends(t, up, 1)
	c.Close()
	out.waitReplies(t, 1)
	select {
	case <-handled:
	case <-time.After(prompt):
		t.Fatal("Handle still waits on the stuck server after Client.Close answered its request")
	}
	up.unstick()
	m.Close()
	if n := numWritten(up, "tools/call"); n != 0 {
		t.Fatalf("%d tools/call written after its session closed", n)
	}
}

func notification(t *testing.T, method, params string) *jsonrpc.Message {
	t.Helper()
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"` + method + `","params":` + params + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return &msg
}

// closeOnReply is a Stream that closes the Mux when it gets its reply: the
// Mux then closes between a reply freeing a slot and the write of the
// queued request it released.
type closeOnReply struct {
	*rec
	m *Mux
}

func (s closeOnReply) Reply(msg []byte) {
	s.rec.Reply(msg)
	s.m.Close()
}

// TestReleasedRequestNotWrittenAfterClose: a queued request released by a
// reply is not written when the Mux closed in the meantime (it was
// answered by Close).
func TestReleasedRequestNotWrittenAfterClose(t *testing.T) {
	m, up := startShared(t, Options{Timeout: time.Minute, MaxInFlight: 1})
	aOut, bOut := closeOnReply{newRec(), m}, newRec()
	c := m.Join(bOut)
	c.Handle(context.Background(), request(t, `"a"`, "tools/call", `{}`), aOut)
	aID := writtenID(t, up, "tools/call", 0)
	c.Handle(context.Background(), request(t, `"b"`, "tools/call", `{}`), bOut)
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+aID+`,"result":{}}`))
	if _, text, isErr := errorCode(t, bOut.waitReplies(t, 1)[0]); !isErr || !strings.Contains(text, "shutting down") {
		t.Fatalf("queued request answered %s", bOut.waitReplies(t, 1)[0])
	}
	if n := numWritten(up, "tools/call"); n != 1 {
		t.Fatalf("%d tools/call written, want 1: the released one went out after Close", n)
	}
}
