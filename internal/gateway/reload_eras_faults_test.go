package gateway

// Attacks on hot reload with requests of each era in flight: a parked
// 2026-07-28 request, an endpoint member mid-call, a legacy SSE session.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestReloadFaultsParkedRequest: a 2026-07-28 tools/call parked for the
// client's input (input_required) on a server that a reload changes or
// removes: the old process is stopped, and the retry with the requestState
// gets one bounded answer (an error or 404), never a hang, nor the new
// process's work under the old state.
func TestReloadFaultsParkedRequest(t *testing.T) {
	for _, mode := range []string{"changed", "removed"} {
		t.Run(mode, func(t *testing.T) {
			stamp := time.Now().UnixNano()
			oldMark := fmt.Sprintf("rlp-old-%d-x", stamp)
			cfg := newConfig(fakeServer("s", testkit.FakeOptions{Marker: oldMark}), fakeServer("k", testkit.FakeOptions{}))
			cfg.Gateway.InputWait = 30 * time.Second
			g, _ := startServing(t, cfg, ReloadOptions{})
			testkit.WaitFor(t, "the server to be ready", func() bool { return g.gw.Readiness().Servers["s"].Ready })
			status, body, err := atkModern(g, 10*time.Second, "s", "1", "sample", `{"prompt":"p"}`, "")
			var r struct {
				Result struct {
					ResultType    string
					InputRequests map[string]json.RawMessage
					RequestState  string
				}
			}
			if err != nil || json.Unmarshal([]byte(body), &r) != nil || r.Result.ResultType != "input_required" {
				t.Fatalf("first: %d %v %s", status, err, body)
			}
			var key string
			for k := range r.Result.InputRequests {
				key = k
			}
			next := cloneConfig(cfg)
			if mode == "changed" {
				next.Servers["s"] = fakeServer("s", testkit.FakeOptions{Marker: fmt.Sprintf("rlp-new-%d-x", stamp)})
			} else {
				delete(next.Servers, "s")
			}
			done := make(chan error, 1)
			go func() { done <- g.gw.Reload(next) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the reload did not end while a request was parked on the server")
			}
			if left := testkit.WaitProcsGone(oldMark, 10*time.Second); len(left) != 0 {
				t.Errorf("old process still runs with a request parked on it: %+v", left)
			}
			st, _ := json.Marshal(r.Result.RequestState)
			answer := `,"inputResponses":{"` + key + `":{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"m"}},"requestState":` + string(st)
			status, body, err = atkModern(g, 10*time.Second, "s", "2", "sample", `{"prompt":"p"}`, answer)
			if err != nil {
				t.Fatalf("retry after the reload: %v (a hang?)", err)
			}
			t.Logf("retry after the reload (%s): %d %s", mode, status, body)
			if strings.Contains(body, "Paris") {
				t.Errorf("the retry after the reload was served: %s", body)
			}
		})
	}
}

// TestReloadFaultsEndpointMemberChangedMidCall: a reload changes one
// member (b) of an endpoint while the endpoint's session has a call in
// flight on each member, and a's own session has one too: the endpoint's
// call on b is answered once, with the reason naming b; its call on a and
// a's own call are untouched and complete on the same process; the same
// endpoint session then calls b's new process.
func TestReloadFaultsEndpointMemberChangedMidCall(t *testing.T) {
	stamp := time.Now().UnixNano()
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{Marker: fmt.Sprintf("rle-a-%d-x", stamp)}),
		fakeServer("b", testkit.FakeOptions{Marker: fmt.Sprintf("rle-b-%d-x", stamp)}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"a", "b"})
	g, _ := startServing(t, cfg, ReloadOptions{})
	ep := g.endpointClient("all")
	ep.connect(t)
	a := g.client("a")
	a.connect(t)
	aPID := pidOf(t, a)
	bPID := pidVia(t, ep, "b__pid")

	call := func(c *mcpClient, id, tool string, ms int) <-chan *reply {
		done := make(chan *reply, 1)
		go func() {
			done <- c.do(t, c.request(http.MethodPost, callBody(id, tool, map[string]any{"ms": ms}, "")), nil)
		}()
		return done
	}
	// Short enough to finish after the reload; b's lasts.
	epA, epB, aOwn := call(ep, "5", "a__slow", 1500), call(ep, "6", "b__slow", 600000), call(a, "7", "slow", 1500)
	testkit.WaitFor(t, "the calls upstream", func() bool { return g.gw.servers["a"].Pending() >= 2 && g.gw.servers["b"].Pending() >= 1 })

	next := cloneConfig(cfg)
	next.Servers["b"] = fakeServer("b", testkit.FakeOptions{Marker: fmt.Sprintf("rle-b2-%d-x", stamp)})
	sum, err := g.gw.reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.EndpointsUpdated, []string{"all"}) || !slices.Equal(sum.Changed, []string{"b"}) {
		t.Errorf("summary %+v", sum)
	}
	answer := func(what string, done <-chan *reply) rpc {
		t.Helper()
		select {
		case r := <-done:
			if r.Status != http.StatusOK || len(r.Msgs) != 1 {
				t.Fatalf("%s: %d, %d messages %s", what, r.Status, len(r.Msgs), r.Body)
			}
			return r.final(t)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s got no answer", what)
			return rpc{}
		}
	}
	const reason = `server "b" of endpoint "all" was replaced by a config reload`
	if m := answer("the endpoint's call on b", epB); m.Error == nil || !strings.Contains(m.Error.Message, reason) || string(m.ID) != "6" {
		t.Errorf("the endpoint's call in flight on b: %+v, want an error naming %q", m, reason)
	}
	if m := answer("the endpoint's call on a", epA); m.Error != nil || toolText(t, m) != "done" {
		t.Errorf("the endpoint's call on a across the reload: %+v", m)
	}
	if m := answer("a's own call", aOwn); m.Error != nil {
		t.Errorf("a's own call across the reload: %+v", m)
	}
	if got := pidOf(t, a); got != aPID {
		t.Errorf("a's pid %s, was %s", got, aPID)
	}
	testkit.WaitFor(t, "a's pending requests to drain", func() bool { return g.gw.servers["a"].Pending() == 0 })
	testkit.WaitFor(t, "b's new process in the endpoint's session", func() bool {
		m := ep.post(t, callBody("8", "b__pid", map[string]string{}, "")).final(t)
		return m.Error == nil && toolText(t, m) != bPID
	})
}

// TestReloadFaultsLegacySession: a 2024-11-05 HTTP+SSE session with a
// call in flight on a server a reload removes: the call is answered on
// the stream with the reason, then the stream ends; its /messages URL is
// 404 after.
func TestReloadFaultsLegacySession(t *testing.T) {
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}), fakeServer("k", testkit.FakeOptions{}))
	g, _ := startServing(t, cfg, ReloadOptions{})
	c := openLegacy(t, g, "/servers/a/sse", nil)
	c.initialize()
	if st := c.post(callBody("5", "slow", map[string]any{"ms": 600000}, "")); st != http.StatusAccepted {
		t.Fatalf("slow call: %d", st)
	}
	testkit.WaitFor(t, "the call upstream", func() bool { return g.gw.servers["a"].Pending() == 1 })
	next := cloneConfig(cfg)
	delete(next.Servers, "a")
	if err := g.gw.Reload(next); err != nil {
		t.Fatal(err)
	}
	var answered int
	for {
		var ev sseEvent
		var ok bool
		select {
		case e, more := <-c.events:
			ev, ok = sseEvent{e.Event, string(e.Data)}, more
		case <-time.After(20 * time.Second):
			t.Fatal("the legacy stream neither answered nor ended after the reload")
		}
		if !ok {
			break
		}
		if ev.event == "message" && strings.Contains(ev.data, `"id":5`) {
			answered++
			if !strings.Contains(ev.data, reasonServerRemoved) {
				t.Errorf("the call in flight: %s, want the reason", ev.data)
			}
		}
	}
	if answered != 1 {
		t.Errorf("the call in flight was answered %d times, want 1", answered)
	}
	if st := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); st != http.StatusNotFound {
		t.Errorf("/messages of the ended legacy session: %d, want 404", st)
	}
}

type sseEvent struct{ event, data string }
