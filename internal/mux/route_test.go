package mux

import (
	"bytes"
	"context"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// initClient joins a session and runs its initialize with caps.
func initClient(t *testing.T, m *Mux, caps string) (*Client, *rec) {
	t.Helper()
	out := newRec()
	c := m.Join(out)
	init := newRec()
	c.Handle(context.Background(), request(t, "0", "initialize", `{"protocolVersion":"2025-11-25","capabilities":`+caps+`}`), init)
	if _, _, isErr := errorCode(t, init.waitReplies(t, 1)[0]); isErr {
		t.Fatal("initialize failed")
	}
	return c, out
}

// writtenID returns the upstream id of the n-th written call of method.
func writtenID(t *testing.T, up *fakeUp, method string, n int) string {
	t.Helper()
	var id string
	up.waitFor(t, method+" written", func() bool {
		w := up.writtenLocked(method)
		if len(w) > n {
			id = string(w[n].Bytes(w[n].ID))
			return true
		}
		return false
	})
	return id
}

// TestServedOncePerGeneration: the first reply to a client request of a
// generation calls Served(gen) once; the gateway's own initialize does not.
func TestServedOncePerGeneration(t *testing.T) {
	m, up := startShared(t, Options{})
	up.answer("tools/call", result(`{}`))
	up.mu.Lock()
	if len(up.served) != 0 {
		t.Fatalf("served %v after the gateway's own initialize", up.served)
	}
	up.mu.Unlock()
	out := newRec()
	c := m.Join(out)
	c.Handle(context.Background(), request(t, "1", "tools/call", `{}`), out)
	c.Handle(context.Background(), request(t, "2", "tools/call", `{}`), out)
	out.waitReplies(t, 2)
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.served) != 1 || up.served[0] != 1 {
		t.Fatalf("served %v, want [1]", up.served)
	}
}

// TestLogMessageOnlyToSoleWriter: a log message reaches a session only when
// it is the one session with a request written to the server and it asked
// for logs with logging/setLevel; queued requests do not count; otherwise it
// is dropped and counted, never broadcast (not even to sessions that set a
// level).
func TestLogMessageOnlyToSoleWriter(t *testing.T) {
	m, up := startShared(t, Options{MaxInFlight: 1})
	up.answer("logging/setLevel", result(`{}`))
	a, aOut := initClient(t, m, `{}`)
	b, bOut := initClient(t, m, `{}`)
	c, cOut := initClient(t, m, `{}`) // never asks for logs
	for _, cl := range []*Client{a, b} {
		lvl := newRec()
		cl.Handle(context.Background(), request(t, "9", "logging/setLevel", `{"level":"debug"}`), lvl)
		lvl.waitReplies(t, 1)
	}
	logLine := []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"secret of a"}}`)

	// Nobody has a request in flight: dropped, not broadcast to b.
	m.Line(1, logLine)
	if n := bOut.numSends() + aOut.numSends(); n != 0 || m.Stats().DroppedNotifications != 1 {
		t.Fatalf("%d deliveries, %d dropped", n, m.Stats().DroppedNotifications)
	}

	aReq := newRec()
	a.Handle(context.Background(), request(t, `"a1"`, "tools/call", `{}`), aReq) // written
	bReq := newRec()
	b.Handle(context.Background(), request(t, `"b1"`, "tools/call", `{}`), bReq) // queued
	m.Line(1, logLine)
	if aReq.numSends() != 1 || bReq.numSends()+bOut.numSends() != 0 {
		t.Fatalf("a got %d, b got %d", aReq.numSends(), bReq.numSends()+bOut.numSends())
	}
	checkWriters(t, m, a)

	// a's reply frees the slot and b's request is written: a no longer has
	// one in flight, b is the sole writer.
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+writtenID(t, up, "tools/call", 0)+`,"result":{}}`))
	writtenID(t, up, "tools/call", 1)
	m.Line(1, logLine)
	if bReq.numSends() != 1 || aReq.numSends() != 1 {
		t.Fatalf("a got %d, b got %d", aReq.numSends(), bReq.numSends())
	}
	checkWriters(t, m, b)

	// Both have requests written: dropped.
	aReq2 := newRec()
	m.mu.Lock()
	m.opts.MaxInFlight = 0 // room for a second written request
	m.mu.Unlock()
	a.Handle(context.Background(), request(t, `"a2"`, "tools/call", `{}`), aReq2)
	writtenID(t, up, "tools/call", 2)
	dropped := m.Stats().DroppedNotifications
	m.Line(1, logLine)
	if aReq2.numSends()+bReq.numSends() != 1 || m.Stats().DroppedNotifications != dropped+1 {
		t.Fatalf("delivered with two sessions in flight")
	}
	checkWriters(t, m, a, b)
	other := []byte(`{"jsonrpc":"2.0","method":"notifications/custom","params":{}}`)
	m.Line(1, other)
	if m.Stats().DroppedNotifications != dropped+2 {
		t.Fatalf("a notification with no single owner was not dropped")
	}

	// The sole writer never asked for logs: dropped, although it is the
	// only session the message could be for.
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+writtenID(t, up, "tools/call", 1)+`,"result":{}}`))
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+writtenID(t, up, "tools/call", 2)+`,"result":{}}`))
	cReq := newRec()
	c.Handle(context.Background(), request(t, `"c1"`, "tools/call", `{}`), cReq)
	writtenID(t, up, "tools/call", 3)
	m.Line(1, logLine)
	if cReq.numSends()+cOut.numSends() != 0 || m.Stats().DroppedNotifications != dropped+3 {
		t.Fatalf("a session that never asked for logs got one (%d dropped)", m.Stats().DroppedNotifications)
	}
}

// checkWriters fails unless m.writers, what attribution looks at, holds
// exactly want, and they are the joined clients with calls written.
func checkWriters(t *testing.T, m *Mux, want ...*Client) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	walked := 0
	for c := range m.clients {
		if c.written > 0 {
			walked++
			if _, ok := m.writers[c]; !ok {
				t.Errorf("a client with %d calls written is not among the writers", c.written)
			}
		}
	}
	if len(m.writers) != walked || walked != len(want) {
		t.Errorf("%d writers, %d clients with calls written, want %d", len(m.writers), walked, len(want))
	}
	for _, c := range want {
		if _, ok := m.writers[c]; !ok {
			t.Errorf("a client expected among the writers is not")
		}
	}
}

// TestClosedWriterLeavesAttribution: of two sessions with requests written,
// the one that closes stops counting: the other is the sole writer and gets
// the server's log line, and once its call is answered nobody is.
func TestClosedWriterLeavesAttribution(t *testing.T) {
	m, up := startShared(t, Options{})
	up.answer("logging/setLevel", result(`{}`))
	a, _ := initClient(t, m, `{}`)
	b, _ := initClient(t, m, `{}`)
	lvl := newRec()
	b.Handle(context.Background(), request(t, "9", "logging/setLevel", `{"level":"debug"}`), lvl)
	lvl.waitReplies(t, 1)
	aReq, bReq := newRec(), newRec()
	a.Handle(context.Background(), request(t, `"a1"`, "tools/call", `{}`), aReq)
	b.Handle(context.Background(), request(t, `"b1"`, "tools/call", `{}`), bReq)
	writtenID(t, up, "tools/call", 1)
	checkWriters(t, m, a, b)
	a.Close()
	checkWriters(t, m, b)
	m.Line(1, []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"for b"}}`))
	if bReq.numSends() != 1 {
		t.Fatalf("the sole writer left got %d log lines, want 1", bReq.numSends())
	}
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+writtenID(t, up, "tools/call", 1)+`,"result":{}}`))
	bReq.waitReplies(t, 1)
	checkWriters(t, m)
}

// TestServerRequestNeedsCapability: a server request goes to the sole
// session with a request written only if it declared the matching
// capability; else the server gets an error (roots/list: the configured
// roots) and the refusal is counted.
func TestServerRequestNeedsCapability(t *testing.T) {
	m, up := startShared(t, Options{Roots: []byte(`{"roots":[{"uri":"file:///r"}]}`)})
	a, _ := initClient(t, m, `{"roots":{}}`)
	aReq := newRec()
	a.Handle(context.Background(), request(t, `"a1"`, "tools/call", `{}`), aReq)
	writtenID(t, up, "tools/call", 0)

	m.Line(1, []byte(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`))
	if aReq.numSends() != 0 || m.Stats().Unroutable != 1 {
		t.Fatalf("sampling request reached a session without the capability (unroutable %d)", m.Stats().Unroutable)
	}
	up.waitFor(t, "the refusal", func() bool {
		for _, s := range up.sent {
			if bytes.Contains(s, []byte(`"id":"s1"`)) && bytes.Contains(s, []byte(`"error"`)) {
				return true
			}
		}
		return false
	})
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":"r1","method":"roots/list"}`))
	if aReq.numSends() != 1 {
		t.Fatal("roots/list did not reach the session that declared roots")
	}

	b, _ := initClient(t, m, `{"sampling":{}}`)
	bReq := newRec()
	b.Handle(context.Background(), request(t, `"b1"`, "tools/call", `{}`), bReq)
	writtenID(t, up, "tools/call", 1)
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":"r2","method":"roots/list"}`))
	up.waitFor(t, "the configured roots", func() bool {
		for _, s := range up.sent {
			if bytes.Contains(s, []byte(`"id":"r2"`)) && bytes.Contains(s, []byte(`file:///r`)) {
				return true
			}
		}
		return false
	})
	if aReq.numSends()+bReq.numSends() != 1 {
		t.Fatal("an ambiguous roots/list reached a session")
	}
	a.Close()
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":"s2","method":"sampling/createMessage","params":{}}`))
	if bReq.numSends() != 1 {
		t.Fatal("sampling request did not reach the sole session that declared sampling")
	}
	msg, _ := jsonrpc.Parse(bReq.sends[0])
	if string(msg.Bytes(msg.ID)) == `"s2"` {
		t.Fatal("server id not rewritten")
	}
}
