package mux

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestSetLevelTimesOutOnTime: logging/setLevel requests of many sessions
// against a stuck server are each answered within their own timeout, not
// one after the other's (they used to queue behind each other's round
// trips, each waiting a whole timeout).
// In a synctest bubble, so that the bound is read on a clock only timers
// move: a busy machine cannot stretch it, a path waiting on a timer does.
func TestSetLevelTimesOutOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 300 * time.Millisecond
		m, up := startShared(t, Options{Timeout: timeout})
		up.stuck.Store(true)
		const sessions = 12
		var wg sync.WaitGroup
		late := make(chan time.Duration, sessions)
		for i := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := newRec()
				c := m.Join(out)
				start := time.Now()
				c.Handle(context.Background(), request(t, "1", "logging/setLevel", `{"level":"`+levels[i%len(levels)]+`"}`), out)
				out.waitReplies(t, 1)
				if d := time.Since(start); d > timeout+prompt {
					late <- d
				}
			}()
		}
		wg.Wait()
		close(late)
		for d := range late {
			t.Errorf("setLevel answered after %v, timeout %v", d, timeout)
		}
	})
}

// TestLevelResentAfterTimedOutSetLevel: a setLevel whose answer did not
// come in time may still have been applied by the server; the level is
// then unknown, so the next change is sent even if it equals the last
// level known.
func TestLevelResentAfterTimedOutSetLevel(t *testing.T) {
	m, up := startShared(t, Options{Timeout: 300 * time.Millisecond})
	up.answer("logging/setLevel", result(`{}`))
	a, b := m.Join(newRec()), m.Join(newRec())
	set := func(c *Client, level string) bool {
		out := newRec()
		c.Handle(context.Background(), request(t, "1", "logging/setLevel", `{"level":"`+level+`"}`), out)
		_, _, isErr := errorCode(t, out.waitReplies(t, 1)[0])
		return !isErr
	}
	if !set(a, "warning") {
		t.Fatal("setLevel refused")
	}
	up.answer("logging/setLevel", nil) // the server takes it but does not answer in time
	if set(b, "debug") {
		t.Fatal("unanswered setLevel succeeded")
	}
	up.answer("logging/setLevel", result(`{}`))
	b.Close() // b's debug may be in force: warning must be sent again
	up.waitFor(t, "warning sent again", func() bool { return len(up.writtenLocked("logging/setLevel")) == 3 })
}

// TestLevelSetBackWhenRequesterLeavesMidSetLevel: a session's setLevel is
// written, and before the server answers the session closes or its
// request is dropped. The requester is answered at once; the server's
// late answer means it now runs at the departed request's level, so the
// level the live sessions want is sent again after that answer (not
// before it, which a server handling requests concurrently could apply
// first). Without that the server stayed at "debug", wanted by nobody.
func TestLevelSetBackWhenRequesterLeavesMidSetLevel(t *testing.T) {
	for _, how := range []string{"closed", "dropped"} {
		t.Run(how, func(t *testing.T) {
			m, up := startShared(t, Options{Timeout: time.Minute})
			up.answer("logging/setLevel", result(`{}`))
			a, b := m.Join(newRec()), m.Join(newRec())
			out := newRec()
			a.Handle(context.Background(), request(t, "1", "logging/setLevel", `{"level":"error"}`), out)
			if _, _, isErr := errorCode(t, out.waitReplies(t, 1)[0]); isErr {
				t.Fatal("setLevel refused")
			}
			up.answer("logging/setLevel", nil) // answered late, by hand
			ctx, drop := context.WithCancel(context.Background())
			defer drop()
			bOut := newRec()
			go b.Handle(ctx, request(t, "1", "logging/setLevel", `{"level":"debug"}`), bOut)
			up.waitFor(t, "debug written", func() bool { return len(up.writtenLocked("logging/setLevel")) == 2 })
			if how == "closed" {
				b.Close()
			} else {
				drop()
			}
			if _, _, isErr := errorCode(t, bOut.waitReplies(t, 1)[0]); !isErr {
				t.Errorf("the departed setLevel was answered with success")
			}
			up.mu.Lock()
			late := up.writtenLocked("logging/setLevel")[1]
			n := len(up.writtenLocked("logging/setLevel"))
			up.mu.Unlock()
			if n != 2 {
				t.Fatalf("%d setLevel written before the server answered the second, want 2", n)
			}
			up.answer("logging/setLevel", result(`{}`))
			m.Line(up.gen.Load(), []byte(`{"jsonrpc":"2.0","id":`+string(late.Bytes(late.ID))+`,"result":{}}`))
			up.waitFor(t, "error sent again", func() bool {
				w := up.writtenLocked("logging/setLevel")
				return len(w) == 3 && bytes.Contains(w[2].Raw, []byte(`"error"`))
			})
			checkLeveled(t, m, 1)
		})
	}
}
