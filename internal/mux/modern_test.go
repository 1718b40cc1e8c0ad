package mux

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

const discoverResult = `{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"tools":{"listChanged":true}},"ttlMs":0,"cacheScope":"public"}`

// startModern returns a Modern Mux over a fake upstream answering
// server/discover with discover (nil: never), started (generation 1).
func startModern(t *testing.T, opts Options, discover answerFunc) (*Mux, *fakeUp) {
	t.Helper()
	opts.Modern = true
	if opts.Name == "" {
		opts.Name = "t"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m := New(opts)
	t.Cleanup(m.Close)
	up := newFakeUp(m)
	if discover != nil {
		up.answer("server/discover", discover)
	}
	m.SetUpstream(up)
	m.Started(1)
	return m, up
}

// modernClient joins a stateless client to m.
func modernClient(t *testing.T, m *Mux) *Client {
	t.Helper()
	c := m.Join(newRec())
	c.Stateless(protocol.StatelessVersion, []byte(`{}`))
	t.Cleanup(c.Close)
	return c
}

func discovered(t *testing.T, m *Mux) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.Discovered(ctx)
}

// TestModernProbeReady: a server whose server/discover lists 2026-07-28
// is Ready without ever seeing initialize; its result is what Discovered
// and ServerInit return, and requests go up untouched but for the id.
func TestModernProbeReady(t *testing.T) {
	m, up := startModern(t, Options{}, result(discoverResult))
	got, err := discovered(t, m)
	if err != nil || string(got) != discoverResult {
		t.Fatalf("Discovered = %s, %v; want the server's result", got, err)
	}
	if st := m.State(); st.Phase != Ready {
		t.Fatalf("state %v (%v), want ready", st.Phase, st.Reason)
	}
	up.mu.Lock()
	probe := up.writtenLocked("server/discover")
	inits := up.writtenLocked("initialize")
	up.mu.Unlock()
	if len(probe) != 1 || len(inits) != 0 {
		t.Fatalf("%d probes and %d initializes written, want 1 and 0", len(probe), len(inits))
	}
	for _, key := range []string{`"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"io.modelcontextprotocol/clientCapabilities":{}`} {
		if !bytes.Contains(probe[0].Raw, []byte(key)) {
			t.Errorf("probe %s lacks %s", probe[0].Raw, key)
		}
	}
	c := modernClient(t, m)
	if !c.Passthrough() {
		t.Error("Passthrough() = false on a Modern Mux")
	}
	if init, err := c.ServerInit(context.Background()); err != nil || string(init) != discoverResult {
		t.Errorf("ServerInit = %s, %v; want the discover result", init, err)
	}
	up.answer("tools/list", result(`{"tools":[],"resultType":"complete"}`))
	out := newRec()
	const meta = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`
	c.Handle(context.Background(), request(t, `"a"`, "tools/list", meta), out)
	if r := string(out.waitReplies(t, 1)[0]); r != `{"jsonrpc":"2.0","id":"a","result":{"tools":[],"resultType":"complete"}}` {
		t.Errorf("reply %s", r)
	}
	up.mu.Lock()
	sent := up.writtenLocked("tools/list")[0]
	up.mu.Unlock()
	if !bytes.Contains(sent.Raw, []byte(`"params":`+meta)) {
		t.Errorf("written %s: params not forwarded as they came", sent.Raw)
	}
	shared, _ := startShared(t, Options{})
	sc := shared.Join(newRec())
	defer sc.Close()
	if sc.Passthrough() {
		t.Error("Passthrough() = true on a shared Mux")
	}
	if _, err := shared.Discovered(context.Background()); err == nil {
		t.Error("Discovered on a Mux that is not Modern succeeded")
	}
}

// TestModernProbeNotModern: a server answering the probe with an error,
// or with a result that does not list 2026-07-28, is not a modern server:
// Discovered says so at once (ErrNotModern, naming the answer), the Mux is
// Failed, and requests get an error naming why.
func TestModernProbeNotModern(t *testing.T) {
	for name, tt := range map[string]struct {
		answer answerFunc
		want   string
	}{
		"error":        {rpcErr(-32601, "Method not found"), "error -32601: Method not found"},
		"old versions": {result(`{"supportedVersions":["2025-11-25"],"capabilities":{}}`), `supportedVersions ["2025-11-25"]`},
		"not a result": {result(`[1]`), "supportedVersions []"},
	} {
		t.Run(name, func(t *testing.T) {
			m, up := startModern(t, Options{}, tt.answer)
			_, err := discovered(t, m)
			if !errors.Is(err, ErrNotModern) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Discovered: %v; want ErrNotModern naming %q", err, tt.want)
			}
			st := waitPhase(t, m, Failed)
			if !errors.Is(st.Reason, ErrNotModern) {
				t.Errorf("reason %v", st.Reason)
			}
			out := newRec()
			modernClient(t, m).Handle(context.Background(), request(t, "1", "tools/list", `{}`), out)
			if _, text, isErr := errorCode(t, out.waitReplies(t, 1)[0]); !isErr || !strings.Contains(text, "not a 2026-07-28 server") {
				t.Errorf("request answered %q, want an error naming the probe", text)
			}
			up.mu.Lock()
			defer up.mu.Unlock()
			if n := len(up.restarts); n != 0 {
				t.Errorf("%d restarts: a server that answered is not restarted", n)
			}
		})
	}
}

// TestModernProbeTimeout: a server that does not answer the probe within
// ProbeTimeout counts as not modern at once (Discovered returns within the
// bound); the same process is probed again after a backoff, and a late
// modern answer makes it Ready.
// In a synctest bubble, so that the bound is read on a clock only timers
// move: a busy machine cannot stretch it, a path waiting on a timer does.
func TestModernProbeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 100 * time.Millisecond
		m, up := startModern(t, Options{ProbeTimeout: bound}, nil)
		start := time.Now()
		_, err := discovered(t, m)
		if !errors.Is(err, ErrNotModern) || !strings.Contains(err.Error(), "no server/discover reply within 100ms") {
			t.Fatalf("Discovered: %v; want ErrNotModern after no reply", err)
		}
		if d := time.Since(start); d > bound+2*time.Second {
			t.Errorf("the verdict took %v, want about %v", d, bound)
		}
		if st := m.State(); st.Phase != BackingOff || st.RetryAt.IsZero() {
			t.Errorf("state %v retry at %v, want backing off with a retry", st.Phase, st.RetryAt)
		}
		up.answer("server/discover", result(discoverResult))
		up.waitFor(t, "a second probe", func() bool { return len(up.writtenLocked("server/discover")) == 2 })
		waitPhase(t, m, Ready)
		if _, err := discovered(t, m); err != nil {
			t.Errorf("Discovered after the late answer: %v", err)
		}
		up.mu.Lock()
		defer up.mu.Unlock()
		if len(up.restarts) != 0 {
			t.Errorf("restarted %v: a slow server is probed again, not killed", up.restarts)
		}
	})
}

// TestModernRestartReprobes: after its process exits, a Modern Mux fails
// what was in flight (an open listen included) and probes the next
// generation before it takes requests again.
func TestModernRestartReprobes(t *testing.T) {
	m, up := startModern(t, Options{}, result(discoverResult))
	if _, err := discovered(t, m); err != nil {
		t.Fatal(err)
	}
	out := newRec()
	modernClient(t, m).Handle(context.Background(), request(t, "1", "subscriptions/listen", `{"notifications":{}}`), out)
	up.waitFor(t, "the listen", func() bool { return len(up.writtenLocked("subscriptions/listen")) == 1 })
	m.Exited(1, errors.New("exit status 2"))
	if _, _, isErr := errorCode(t, out.waitReplies(t, 1)[0]); !isErr {
		t.Fatal("the listen of an exited process did not get an error")
	}
	up.gen.Store(2)
	m.Started(2)
	if _, err := discovered(t, m); err != nil {
		t.Fatal(err)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if n := len(up.writtenLocked("server/discover")); n != 2 {
		t.Errorf("%d probes, want one per generation", n)
	}
}

// TestModernCloseDuringProbe: Close while the probe waits for its answer
// returns at once, and so does a Discovered waiting for it.
// In a synctest bubble, so that the bound is read on a clock only timers
// move: a busy machine cannot stretch it, a path waiting on a timer does.
func TestModernCloseDuringProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _ := startModern(t, Options{ProbeTimeout: time.Hour, InitTimeout: time.Hour}, nil)
		done := make(chan error, 1)
		go func() {
			_, err := m.Discovered(context.Background())
			done <- err
		}()
		synctest.Wait() // Discovered waits for the probe
		start := time.Now()
		m.Close()
		if d := time.Since(start); d > time.Second {
			t.Errorf("Close took %v during a probe", d)
		}
		select {
		case err := <-done:
			if err == nil {
				t.Error("Discovered succeeded on a closed Mux")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Discovered still waiting after Close")
		}
	})
}

// TestModernRefusesRemovedAndServerRequests: requests the revision removed
// are answered -32601 by the Mux and never reach the server (a dual-era
// server must not see initialize); removed notifications are dropped;
// server requests are refused.
func TestModernRefusesRemovedAndServerRequests(t *testing.T) {
	m, up := startModern(t, Options{}, result(discoverResult))
	if _, err := discovered(t, m); err != nil {
		t.Fatal(err)
	}
	c := modernClient(t, m)
	for _, method := range protocol.RemovedRequests {
		out := newRec()
		c.Handle(context.Background(), request(t, "1", method, `{}`), out)
		if code, _, _ := errorCode(t, out.waitReplies(t, 1)[0]); code != protocol.CodeMethodNotFound {
			t.Errorf("%s answered with code %d, want -32601", method, code)
		}
	}
	note, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	c.Handle(context.Background(), &note, nil)
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`))
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, s := range up.sent {
		msg, _ := jsonrpc.Parse(s)
		if !msg.MethodIs("server/discover") && msg.Kind != jsonrpc.KindResponse {
			t.Errorf("written upstream: %s", s)
		}
	}
	last, _ := jsonrpc.Parse(up.sent[len(up.sent)-1])
	if !last.IsError || string(last.Bytes(last.ID)) != `"s1"` {
		t.Errorf("server request answered %s, want an error with its id", last.Raw)
	}
	if n := m.Stats().Unroutable; n != 1 {
		t.Errorf("Unroutable = %d, want 1", n)
	}
}

// TestModernSubscriptionIDs: two clients open listens with the same id and
// filter; the server sees one listen of the gateway's, and each client gets
// its own acknowledgement, each notification and the final result, tagged
// with its own id. Listens have no deadline once acknowledged and hold no
// MaxInFlight slot, and do not make their client the target of untagged
// notifications.
func TestModernSubscriptionIDs(t *testing.T) {
	m, up := startModern(t, Options{MaxInFlight: 1}, result(discoverResult))
	if _, err := discovered(t, m); err != nil {
		t.Fatal(err)
	}
	const listen = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true}}`
	outA, outB := newRec(), newRec()
	a, b := modernClient(t, m), modernClient(t, m)
	a.Handle(context.Background(), request(t, `"L"`, "subscriptions/listen", listen), outA)
	b.Handle(context.Background(), request(t, `"L"`, "subscriptions/listen", listen), outB)
	up.mu.Lock()
	ls := up.writtenLocked("subscriptions/listen")
	up.mu.Unlock()
	if len(ls) != 1 {
		t.Fatalf("%d listens written, want the gateway's one", len(ls))
	}
	upL := string(ls[0].Bytes(ls[0].ID))
	tagged := func(method, sub string) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"` + method + `","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":` + sub + `}}}`)
	}
	m.Line(1, tagged("notifications/tools/list_changed", upL)) // before the ack: dropped
	m.Line(1, tagged("notifications/subscriptions/acknowledged", upL))
	m.Line(1, tagged("notifications/tools/list_changed", upL))
	m.Line(1, tagged("notifications/tools/list_changed", "999")) // no such listen: dropped
	m.mu.Lock()
	timed := m.oldest != nil
	m.mu.Unlock()
	if timed {
		t.Error("an acknowledged listen is in the deadline list: it would time out")
	}
	// A request still goes through beside the listens with MaxInFlight 1.
	up.answer("tools/list", result(`{"tools":[]}`))
	outC := newRec()
	a.Handle(context.Background(), request(t, "7", "tools/list", `{}`), outC)
	if r := outC.waitReplies(t, 1)[0]; !bytes.Contains(r, []byte(`"result"`)) {
		t.Fatalf("tools/list beside the listens: %s", r)
	}
	// An untagged log message while only listens are open has no owner.
	m.Line(1, []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`))
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+upL+`,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":`+upL+`}}}`))
	want := []string{
		`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"},"notifications":{"toolsListChanged":true}}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}}`,
	}
	for name, out := range map[string]*rec{"A": outA, "B": outB} {
		if r := string(out.waitReplies(t, 1)[0]); r != `{"jsonrpc":"2.0","id":"L","result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}}` {
			t.Errorf("%s's final result %s", name, r)
		}
		out.mu.Lock()
		got := out.sends
		out.mu.Unlock()
		if len(got) != len(want) {
			t.Errorf("%s got %q, want %q", name, got, want)
			continue
		}
		for i := range want {
			if string(got[i]) != want[i] {
				t.Errorf("%s's message %d = %s, want %s", name, i, got[i], want[i])
			}
		}
	}
	if n := m.Stats().DroppedNotifications; n != 3 {
		t.Errorf("DroppedNotifications = %d, want 3 (before the ack, unknown subscription, unowned log message)", n)
	}
	if n := m.Pending(); n != 0 {
		t.Errorf("%d pending after the server ended the listen", n)
	}
}

// TestModernServerEndsListen: the server's notifications/cancelled naming
// a listen reaches the listen's stream with the client's id, and ends it.
func TestModernServerEndsListen(t *testing.T) {
	m, up := startModern(t, Options{}, result(discoverResult))
	if _, err := discovered(t, m); err != nil {
		t.Fatal(err)
	}
	out := newRec()
	modernClient(t, m).Handle(context.Background(), request(t, "5", "subscriptions/listen", `{"notifications":{}}`), out)
	var upID string
	up.waitFor(t, "the listen", func() bool {
		ls := up.writtenLocked("subscriptions/listen")
		if len(ls) == 1 {
			upID = string(ls[0].Bytes(ls[0].ID))
		}
		return len(ls) == 1
	})
	m.Line(1, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+upID+`,"reason":"bye"}}`))
	if r := out.waitReplies(t, 1)[0]; r != nil {
		t.Errorf("ended listen answered %s, want no reply", r)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.sends) != 1 || string(out.sends[0]) != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"bye"}}` {
		t.Errorf("stream got %q", out.sends)
	}
	if n := m.Pending(); n != 0 {
		t.Errorf("%d pending", n)
	}
}
