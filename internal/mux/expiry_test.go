package mux

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// callAndAnswer sends request id through c and answers it at once, as the
// server's reply would arrive, and returns the client's reply.
func callAndAnswer(t *testing.T, m *Mux, up *silent, c *Client, out *collect, id int) []byte {
	t.Helper()
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	c.Handle(context.Background(), &msg, out)
	up.mu.Lock()
	sent, _ := jsonrpc.Parse(up.sent[len(up.sent)-1])
	up.mu.Unlock()
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+string(sent.Bytes(sent.ID))+`,"result":{}}`))
	<-out.done
	out.mu.Lock()
	defer out.mu.Unlock()
	return out.replies[len(out.replies)-1]
}

// A session making one call at a time does not touch the expiry timer per
// call: it is set when the first call is registered and left alone while it
// is set for an earlier deadline (every call has the same timeout).
func TestExpiryTimerNotSetPerCall(t *testing.T) {
	m := New(Options{Name: "t", Timeout: time.Hour})
	defer m.Close()
	up := &silent{m: m}
	m.SetUpstream(testkit.Genless(up))
	m.Started(1)
	out := &collect{done: make(chan struct{}, 1)}
	c := m.Join(out)
	const calls = 50
	for i := range calls {
		if r := callAndAnswer(t, m, up, c, out, i); !bytes.Contains(r, []byte(`"result"`)) {
			t.Fatalf("call %d: %s", i, r)
		}
	}
	m.mu.Lock()
	arms := m.expiryArms
	m.mu.Unlock()
	if arms != 1 {
		t.Fatalf("expiry timer set %d times for %d calls one after another, want 1", arms, calls)
	}
}

// A call registered while the timer is still set for an earlier call, long
// answered, still times out: the timer fires at the earlier deadline and
// expire sets it again for the call left.
func TestCallAfterAnsweredOneStillTimesOut(t *testing.T) {
	// In a synctest bubble: the answer must come before the timeout,
	// which a busy machine could otherwise let fire first.
	synctest.Test(t, func(t *testing.T) {
		m := New(Options{Name: "t", Timeout: 200 * time.Millisecond})
		defer m.Close()
		up := &silent{m: m}
		m.SetUpstream(testkit.Genless(up))
		m.Started(1)
		out := &collect{done: make(chan struct{}, 1)}
		c := m.Join(out)
		callAndAnswer(t, m, up, c, out, 1)
		msg, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}`))
		c.Handle(context.Background(), &msg, out)
		select {
		case <-out.done:
		case <-time.After(15 * time.Second):
			t.Fatal("the unanswered call never timed out")
		}
		out.mu.Lock()
		r := out.replies[len(out.replies)-1]
		out.mu.Unlock()
		if !bytes.Contains(r, []byte(`"id":2`)) || !bytes.Contains(r, []byte(`-32001`)) {
			t.Fatalf("reply %s, want the timeout of call 2", r)
		}
		if st := m.Stats(); st.TimedOut != 1 || m.Pending() != 0 {
			t.Fatalf("timed out %d, pending %d", st.TimedOut, m.Pending())
		}
	})
}
