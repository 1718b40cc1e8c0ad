package mux

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestStateTransitions walks a server through its lifecycle and checks
// what a client gets in each phase: Ready forwards, BackingOff answers at
// once with the exit reason and the retry time, Failed after Close. It
// runs in a synctest bubble: the retry time and "at once" are read on the
// bubble's clock, which only moves when every goroutine waits, so a busy
// machine cannot stretch them.
func TestStateTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Options{Name: "memory", Logger: slog.New(slog.DiscardHandler)})
		defer m.Close()
		if st := m.State(); st.Phase != Starting || st.Since.IsZero() {
			t.Fatalf("new: %+v", st)
		}
		up := newFakeUp(m)
		up.answer("tools/call", result(`{}`))
		m.SetUpstream(up)
		m.Started(1)
		waitPhase(t, m, Ready)

		out := newRec()
		c := m.Join(out)
		c.Handle(context.Background(), request(t, "1", "tools/call", `{}`), out)
		if _, _, isErr := errorCode(t, out.waitReplies(t, 1)[0]); isErr {
			t.Fatal("ready server refused a request")
		}

		exit := errors.New(`upstream: server process exited: exit status 1; last stderr: "boom"`)
		m.Exited(1, exit)
		st := m.State()
		if st.Phase != BackingOff || !errors.Is(st.Reason, exit) {
			t.Fatalf("after Exited: %+v", st)
		}
		m.Waiting(exit, 3*time.Second)
		st = m.State()
		if st.Phase != BackingOff || time.Until(st.RetryAt) <= 2*time.Second || time.Until(st.RetryAt) > 3*time.Second {
			t.Fatalf("after Waiting: %+v", st)
		}
		start := time.Now()
		c.Handle(context.Background(), request(t, "2", "tools/call", `{}`), out)
		r := out.waitReplies(t, 2)[1]
		if time.Since(start) > time.Second {
			t.Fatalf("a request to a backing-off server waited %v", time.Since(start))
		}
		_, text, isErr := errorCode(t, r)
		want := `mcpgate: server "memory" is not available: upstream: server process exited: exit status 1; last stderr: "boom"; retrying in `
		if !isErr || !strings.HasPrefix(text, want) {
			t.Fatalf("reply %s\nwant message starting %q", r, want)
		}

		up.gen.Store(2)
		m.Started(2)
		if st := m.State(); st.Phase != Starting && st.Phase != Ready {
			t.Fatalf("after Started: %+v", st)
		}
		waitPhase(t, m, Ready)
		c.Handle(context.Background(), request(t, "3", "tools/call", `{}`), out)
		if _, _, isErr := errorCode(t, out.waitReplies(t, 3)[2]); isErr {
			t.Fatal("restarted server refused a request")
		}
		m.Close()
		if st := m.State(); st.Phase != Failed || !errors.Is(st.Reason, errClosed) {
			t.Fatalf("after Close: %+v", st)
		}
	})
}

// TestStartingRequestsWait: while the server is merely starting (a slow
// first npx), a request waits for it instead of failing.
func TestStartingRequestsWait(t *testing.T) {
	m := New(Options{Name: "t", Logger: slog.New(slog.DiscardHandler)})
	defer m.Close()
	up := newFakeUp(m)
	up.answer("tools/call", result(`{}`))
	m.SetUpstream(up)
	out := newRec()
	c := m.Join(out)
	go c.Handle(context.Background(), request(t, "1", "tools/call", `{}`), out)
	m.Started(1)
	if _, _, isErr := errorCode(t, out.waitReplies(t, 1)[0]); isErr {
		t.Fatal("a request made while starting failed")
	}
}

// TestInitFailureRestartsProcess: a failed gateway-side initialize is not
// permanent: the process is restarted through Restart, clients meanwhile
// get the reason at once, and the next generation serves.
func TestInitFailureRestartsProcess(t *testing.T) {
	m := New(Options{Name: "t", Logger: slog.New(slog.DiscardHandler)})
	defer m.Close()
	up := newFakeUp(m)
	up.answer("initialize", rpcErr(-32603, "cannot open database"))
	up.answer("tools/call", result(`{}`))
	m.SetUpstream(up)
	m.Started(1)
	up.waitFor(t, "a restart", func() bool { return len(up.restarts) == 1 })
	up.mu.Lock()
	reason := up.restarts[0]
	up.mu.Unlock()
	if want := "initialize failed: the server answered with error -32603: cannot open database"; reason != want {
		t.Fatalf("restart reason %q, want %q", reason, want)
	}
	st := waitPhase(t, m, BackingOff)
	if st.Reason == nil || !strings.Contains(st.Reason.Error(), "cannot open database") {
		t.Fatalf("state %+v", st)
	}
	out := newRec()
	c := m.Join(out)
	c.Handle(context.Background(), request(t, "1", "tools/call", `{}`), out)
	// One prefix, the cause chain said once.
	want := `mcpgate: server "t" is not available: initialize failed: the server answered with error -32603: cannot open database; restarting`
	if _, text, isErr := errorCode(t, out.waitReplies(t, 1)[0]); !isErr || text != want {
		t.Fatalf("reply %q, want %q", text, want)
	}
	// The supervisor kills generation 1 and starts generation 2.
	m.Exited(1, errors.New("upstream: server process exited: signal: killed (killed by the gateway: "+reason+")"))
	m.Waiting(errors.New("exit"), time.Millisecond)
	up.answer("initialize", result(`{"protocolVersion":"2025-11-25","capabilities":{}}`))
	up.gen.Store(2)
	m.Started(2)
	waitPhase(t, m, Ready)
	c.Handle(context.Background(), request(t, "2", "tools/call", `{}`), out)
	if _, _, isErr := errorCode(t, out.waitReplies(t, 2)[1]); isErr {
		t.Fatal("the restarted server refused a request")
	}
}

// TestInitFailureRetriedWithoutRestart: an upstream that cannot be
// restarted (a remote one) gets its initialize retried after a backoff.
func TestInitFailureRetriedWithoutRestart(t *testing.T) {
	m := New(Options{Name: "t", Logger: slog.New(slog.DiscardHandler)})
	defer m.Close()
	up := newFakeUp(m)
	fails := 1
	up.answer("initialize", func(id string) []byte {
		if fails > 0 { // guarded by up.mu
			fails--
			return rpcErr(-32000, "warming up")(id)
		}
		return result(`{"protocolVersion":"2025-11-25","capabilities":{}}`)(id)
	})
	m.SetUpstream(testkit.Genless(up)) // cannot restart, like a remote upstream
	m.Started(1)
	st := waitPhase(t, m, BackingOff)
	if st.RetryAt.IsZero() {
		t.Fatalf("no retry time: %+v", st)
	}
	waitPhase(t, m, Ready)
	up.mu.Lock()
	defer up.mu.Unlock()
	if n := len(up.writtenLocked("initialize")); n != 2 {
		t.Fatalf("%d initializes, want 2", n)
	}
}

// TestInitTimeoutIndependentOfRequestTimeout: the gateway's initialize has
// its own timeout; a short per-request timeout does not cut it.
func TestInitTimeoutIndependentOfRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		def := New(Options{})
		def.Close()
		if d := def.opts.InitTimeout; d != 120*time.Second {
			t.Fatalf("default InitTimeout %v", d)
		}
		m := New(Options{Name: "t", Timeout: 50 * time.Millisecond, InitTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		defer m.Close()
		up := newFakeUp(m)
		up.answer("initialize", nil)
		m.SetUpstream(up)
		m.Started(1)
		var initID string
		up.waitFor(t, "initialize", func() bool {
			w := up.writtenLocked("initialize")
			if len(w) == 1 {
				initID = string(w[0].Bytes(w[0].ID))
			}
			return len(w) == 1
		})
		// Answer well after the request timeout: only the init timeout
		// counts. In the synctest bubble the 200 ms pass on its clock, the
		// 50 ms request timer firing on the way, however busy the machine.
		time.Sleep(200 * time.Millisecond)
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+initID+`,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`))
		waitPhase(t, m, Ready)
	})
}

// TestInitTimeout: no initialize answer within InitTimeout restarts the
// process, with the reason.
func TestInitTimeout(t *testing.T) {
	m := New(Options{Name: "t", InitTimeout: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	defer m.Close()
	up := newFakeUp(m)
	up.answer("initialize", nil)
	m.SetUpstream(up)
	m.Started(1)
	up.waitFor(t, "a restart", func() bool { return len(up.restarts) == 1 })
	st := m.State()
	if st.Phase != BackingOff || !strings.Contains(st.Reason.Error(), "no initialize reply within 100ms") {
		t.Fatalf("state %+v", st)
	}
}
