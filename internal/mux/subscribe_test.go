package mux

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// subCount returns the Mux's reference count of uri.
func subCount(m *Mux, uri string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.subs[uri])
}

// TestSubscribeUndoneWithoutSuccess: a resources/subscribe that ends
// without the server's success (cancelled by the client, abandoned,
// refused before it was written, its session closed) releases its
// reference, so the next subscriber of the URI subscribes upstream again.
func TestSubscribeUndoneWithoutSuccess(t *testing.T) {
	const uri = "file:///a"
	sub := `{"uri":"` + uri + `"}`
	m, up := startShared(t, Options{}) // resources/subscribe is never answered
	subscribes := 0
	next := func(t *testing.T) {
		t.Helper()
		writtenID(t, up, "resources/subscribe", subscribes)
		subscribes++
	}

	t.Run("cancelled", func(t *testing.T) {
		c, _ := initClient(t, m, `{}`)
		out := newRec()
		c.Handle(context.Background(), request(t, "1", "resources/subscribe", sub), out)
		next(t)
		cancel, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`))
		c.Handle(context.Background(), &cancel, nil)
		if r := out.waitReplies(t, 1)[0]; r != nil {
			t.Fatalf("cancelled subscribe answered %s", r)
		}
		if n := subCount(m, uri); n != 0 {
			t.Fatalf("%d references after the cancelled subscribe", n)
		}
	})
	t.Run("abandoned", func(t *testing.T) {
		c, _ := initClient(t, m, `{}`)
		out := newRec()
		c.Handle(context.Background(), request(t, "1", "resources/subscribe", sub), out)
		next(t)
		c.Abandon(out)
		if n := subCount(m, uri); n != 0 {
			t.Fatalf("%d references after the abandoned subscribe", n)
		}
	})
	t.Run("closed", func(t *testing.T) {
		c, _ := initClient(t, m, `{}`)
		out := newRec()
		c.Handle(context.Background(), request(t, "1", "resources/subscribe", sub), out)
		next(t)
		c.Close()
		out.waitReplies(t, 1)
		if n := subCount(m, uri); n != 0 {
			t.Fatalf("%d references after the closed session", n)
		}
	})
	t.Run("refused", func(t *testing.T) {
		const uri = "file:///b" // its own URI: no count left by the cases above
		sub := `{"uri":"` + uri + `"}`
		c, _ := initClient(t, m, `{}`)
		exit := errors.New("exit status 1")
		m.Exited(1, exit)
		m.Waiting(exit, time.Minute) // backing off: refused at once
		out := newRec()
		c.Handle(context.Background(), request(t, "1", "resources/subscribe", sub), out)
		if _, _, isErr := errorCode(t, out.waitReplies(t, 1)[0]); !isErr {
			t.Fatal("subscribe to a backing-off server succeeded")
		}
		if n := subCount(m, uri); n != 0 {
			t.Fatalf("%d references after the refused subscribe", n)
		}
		m.mu.Lock()
		left := c.subs[uri]
		m.mu.Unlock()
		if left {
			t.Fatal("the session still counts the refused subscription")
		}
	})
}

// TestSubscribeAfterCloseRefused: a resources/subscribe that reaches a
// session already closed (a request racing its DELETE) is refused and
// holds nothing: the closed session gets no updates, and when the last
// live subscriber leaves, the server is unsubscribed.
func TestSubscribeAfterCloseRefused(t *testing.T) {
	const uri = "file:///watched"
	m, up := startShared(t, Options{})
	up.answer("resources/subscribe", result(`{}`))
	up.answer("resources/unsubscribe", result(`{}`))
	a, aOut := initClient(t, m, `{}`)
	r := newRec()
	a.Handle(context.Background(), request(t, "1", "resources/subscribe", `{"uri":"`+uri+`"}`), r)
	r.waitReplies(t, 1)

	b, bOut := initClient(t, m, `{}`)
	b.Close()
	r2 := newRec()
	b.Handle(context.Background(), request(t, "1", "resources/subscribe", `{"uri":"`+uri+`"}`), r2)
	if _, _, isErr := errorCode(t, r2.waitReplies(t, 1)[0]); !isErr {
		t.Errorf("a closed session's subscribe succeeded")
	}
	if n := subCount(m, uri); n != 1 {
		t.Errorf("%d subscribers of %s, want 1 (the closed session is not one)", n, uri)
	}
	m.Line(1, []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"`+uri+`"}}`))
	if aOut.numSends() != 1 || bOut.numSends() != 0 {
		t.Fatalf("updates: live subscriber %d (want 1), closed session %d (want 0)", aOut.numSends(), bOut.numSends())
	}
	a.Close()
	up.waitFor(t, "the server unsubscribed after the last live subscriber left", func() bool {
		return len(up.writtenLocked("resources/unsubscribe")) == 1
	})
}
