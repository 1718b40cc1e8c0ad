package mux

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// errData returns the "data" of an error reply, or nil.
func errData(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var env struct {
		Error *struct {
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("bad reply %s: %v", raw, err)
	}
	if env.Error == nil {
		return nil
	}
	return env.Error.Data
}

// A shared server that has never been ready (a first `npx -y` download)
// keeps a client's initialize waiting up to InitTimeout, past readyWait
// (30 s), and answers it once the gateway's own initialize is. Fake time
// (testing/synctest): the 90 s go by at once, and exactly.
func TestFirstStartInitializeWaitsForInitTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Options{Name: "npx", InitTimeout: 2 * time.Minute, Logger: slog.New(slog.DiscardHandler)})
		defer m.Close()
		up := newFakeUp(m)
		up.answer("initialize", nil) // downloading: the gateway's initialize is unanswered
		m.SetUpstream(up)
		m.Started(1)
		c := m.Join(newRec())
		out := newRec()
		go c.Handle(context.Background(), request(t, "7", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{}}`), out)

		time.Sleep(90 * time.Second)
		synctest.Wait()
		if early := out.repliesNow(); len(early) != 0 {
			t.Fatalf("answered while the first start was still within InitTimeout: %s", early[0])
		}

		// The download ends: the server answers the gateway's initialize.
		up.mu.Lock()
		inits := up.writtenLocked("initialize")
		up.mu.Unlock()
		if len(inits) != 1 {
			t.Fatalf("%d initialize requests written, want the gateway's one", len(inits))
		}
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+string(inits[0].Bytes(inits[0].ID))+`,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`))
		reply := out.waitReplies(t, 1)[0]
		if _, text, isErr := errorCode(t, reply); isErr {
			t.Fatalf("initialize failed: %s", text)
		}
		if !strings.HasPrefix(string(reply), `{"jsonrpc":"2.0","id":7,`) {
			t.Errorf("reply %s", reply)
		}
	})
}

// Once the server has been ready, a restart keeps the old bound: a request
// waits readyWait, then fails with the time to retry in its data; and while
// the first start outlasts InitTimeout, the same.
func TestStillStartingCarriesRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Options{Name: "npx", InitTimeout: 2 * time.Minute, Logger: slog.New(slog.DiscardHandler)})
		defer m.Close()
		up := newFakeUp(m)
		m.SetUpstream(up)
		m.Started(1)
		synctest.Wait() // ready: the fake answers initialize at once
		if st := m.State(); st.Phase != Ready {
			t.Fatalf("state %v", st.Phase)
		}
		up.answer("initialize", nil) // the restarted process hangs in initialize
		m.Exited(1, errors.New("exit status 1"))
		up.gen.Store(2)
		m.Started(2)
		c := m.Join(newRec())
		out := newRec()
		go c.Handle(context.Background(), request(t, "1", "tools/list", ""), out)
		time.Sleep(readyWait - time.Second)
		synctest.Wait()
		if n := len(out.repliesNow()); n != 0 {
			t.Fatalf("%d replies before readyWait", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		replies := out.repliesNow()
		if len(replies) != 1 {
			t.Fatalf("%d replies at readyWait, want the error: only a first start waits InitTimeout", len(replies))
		}
		reply := replies[0]
		_, text, isErr := errorCode(t, reply)
		if !isErr || !strings.Contains(text, "still starting") {
			t.Fatalf("reply %s", reply)
		}
		// The gateway's initialize of generation 2 gives up 2 min after it
		// started, 30 s ago: retry in 90 s.
		if ra, _ := errData(t, reply)["retryAfter"].(float64); ra != 90 {
			t.Errorf("retryAfter %v, want 90: reply %s", ra, reply)
		}
	})
}

// A server backing off (its first start crashed) answers at once, naming
// why, with the seconds until its next start as the error's data.
func TestBackingOffCarriesRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Options{Name: "npx", Logger: slog.New(slog.DiscardHandler)})
		defer m.Close()
		up := newFakeUp(m)
		up.answer("initialize", nil)
		m.SetUpstream(up)
		m.Started(1)
		crash := errors.New(`upstream: server process exited: exit status 1 after 2s; stderr: "Error: Cannot find package 'zod'"`)
		m.Exited(1, crash)
		m.Waiting(crash, 7*time.Second)
		c := m.Join(newRec())
		out := newRec()
		c.Handle(context.Background(), request(t, "1", "initialize", `{"protocolVersion":"2025-11-25","capabilities":{}}`), out)
		reply := out.waitReplies(t, 1)[0]
		_, text, isErr := errorCode(t, reply)
		if !isErr || !strings.Contains(text, `Error: Cannot find package 'zod'`) || !strings.Contains(text, "retrying in 7s") {
			t.Fatalf("reply %s", reply)
		}
		if ra, _ := errData(t, reply)["retryAfter"].(float64); ra != 7 {
			t.Errorf("retryAfter %v, want 7: reply %s", ra, reply)
		}
	})
}

// repliesNow returns the replies r holds now.
func (r *rec) repliesNow() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.replies...)
}
