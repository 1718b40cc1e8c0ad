package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The crossfire of TestStatelessCrossfire again, on a server that speaks
// 2026-07-28 itself (the fake with Modern: its requests take the
// passthrough path, not translation): many concurrent stateless clients on
// the server's one process for them, every one with the same ids and
// progress tokens (1 and "1" and more forms), subscriptions/listen
// streams with colliding ids and different filters while other clients
// call tools that make the server notify them, and clients of the session
// eras (2025-11-25) on the same server at the same time. Zero tolerance:
// every request gets exactly one reply with its own id byte for byte, its
// own progress only and nobody else's payload; every listen gets its
// acknowledgement first and then exactly the notifications its filter
// selects, tagged with its own id.

// Ids and progress tokens every client uses: the same bytes in every
// client, and forms that are equal as numbers or as strings but not as
// bytes ("" is no token: the reply is a JSON body, not a stream).
var (
	crossIDs    = []string{`1`, `"1"`, `1.0`, `"\u0031"`, `12345678901234567890123`, `0`, `"t"`}
	crossTokens = []string{`"t"`, `1`, `"1"`, `"\u0074"`, `1.0`, ``}
)

// crossMarker finds the payload markers of the crossfire's calls.
var crossMarker = regexp.MustCompile(`[ml]c\d+/\d+`)

// waitGateway waits (bounded) until nothing is pending upstream and no
// session is recorded. It closes the test client's idle connections: a
// connection the client dialed but never sent a request on (one dialed
// for a request that found another connection first, or that was left)
// would hold the gateway's shutdown for 5 s (http.Server.Shutdown waits
// that long for a new connection's first request).
func waitGateway(t *testing.T, g *testGateway) {
	t.Helper()
	defer g.http.Transport.(*http.Transport).CloseIdleConnections()
	testkit.WaitFor(t, "no request pending upstream and no session recorded after the crossfire", func() bool {
		return g.pending("s") == 0 && g.gw.Handler.Sessions() == 0
	})
}

// fakeCalls asks the server's process for 2026-07-28 requests what it has
// in flight and what was cancelled (the fake's tool "calls"), by the
// message argument of each tools/call.
func fakeCalls(t *testing.T, g *testGateway) (inflight, cancelled []string) {
	t.Helper()
	status, m := modernCall(t, g, "s", `"calls"`, "calls", map[string]string{}, "")
	var res struct {
		Content []struct{ Text string }
	}
	if status != http.StatusOK || json.Unmarshal(m["result"], &res) != nil || len(res.Content) == 0 {
		t.Fatalf("calls: %d %s %s", status, m["result"], m["error"])
	}
	var calls struct {
		Inflight, Cancelled []struct {
			Method string
			Params struct {
				Name      string
				Arguments struct{ Message string }
			}
		}
	}
	if err := json.Unmarshal([]byte(res.Content[0].Text), &calls); err != nil {
		t.Fatalf("calls: %q: %v", res.Content[0].Text, err)
	}
	for _, c := range calls.Inflight {
		inflight = append(inflight, c.Method+" "+c.Params.Name+" "+c.Params.Arguments.Message)
	}
	for _, c := range calls.Cancelled {
		cancelled = append(cancelled, c.Method+" "+c.Params.Name+" "+c.Params.Arguments.Message)
	}
	return inflight, cancelled
}

// TestModernCrossfire: 40 stateless clients x 10 echo calls, 12 listens
// with different filters opened at once (ids 7, "7", 7.0: colliding with
// each other and with the calls' ids), 6 clients opening and closing
// covered listens, 8 clients x 7 calls that make the server notify its
// listens, and 10 sessions of 2025-11-25 x 10 echo calls, all on one
// Modern fake, concurrently. Then a listen asking for more (the gateway's
// listen is replaced) and more notifications; then the server ends its
// listen and every client listen gets exactly what it selects, and the
// final result, with its own id.
func TestModernCrossfire(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("s", testkit.FakeOptions{Modern: true})))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const clients, calls, legacyClients, notifiers, churners, churns = 40, 10, 10, 8, 6, 5
	var x crossTally

	// The listens that stay, opened at once: the gateway's listen grows
	// (is replaced) while they arrive.
	listenIDs := []string{`7`, `"7"`, `7.0`}
	filters := []string{
		`{"toolsListChanged":true}`,
		`{"resourcesListChanged":true}`,
		`{"resourceSubscriptions":["mem://a"]}`,
		`{"toolsListChanged":true,"resourceSubscriptions":["mem://dir/"]}`,
		`{"toolsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["mem://a","mem://dir/"]}`,
		`{"resourcesListChanged":true,"resourceSubscriptions":["mem://dir/"]}`,
	}
	var stable []*crossListen
	for i := range 12 {
		stable = append(stable, openListen(ctx, g, fmt.Sprintf("listen %d", i), listenIDs[i%len(listenIDs)], filters[i%len(filters)]))
	}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range calls {
				modernEcho(ctx, g, &x, c, i)
			}
		})
	}
	for c := range legacyClients {
		wg.Go(func() { legacyCrossClient(ctx, g, &x, c, calls) })
	}
	for _, l := range stable {
		if !l.waitUntil(ctx, acked) {
			msgs, ended, err := l.snapshot()
			t.Fatalf("%s (id %s) not acknowledged: %q, ended %v, %v", l.name, l.id, msgs, ended, err)
		}
	}

	// Notifications while listens come and go and calls cross.
	events := []crossEvent{
		{"list_changed", "kind", "tools"},
		{"list_changed", "kind", "resources"},
		{"list_changed", "kind", "prompts"}, // nobody listens for prompts yet
		{"touch", "uri", "mem://a"},
		{"touch", "uri", "mem://dir/x"},
		{"touch", "uri", "mem://dirt"}, // not under mem://dir/
		{"touch", "uri", "mem://b"},
	}
	notify := func(id string, e crossEvent) {
		resp, err := crossPost(ctx, g, "tools/call", e.tool, crossToolBody(id, e.tool, map[string]string{e.arg: e.value}, ""))
		if err != nil {
			x.add(false, fmt.Errorf("%s %s: %v", e.tool, e.value, err))
			return
		}
		msgs, err := readMessages(resp, nil)
		want := map[string]string{"list_changed": "ok", "touch": "touched"}[e.tool]
		if err != nil || resp.StatusCode != http.StatusOK {
			x.add(false, fmt.Errorf("%s %s: status %d, %v, %q", e.tool, e.value, resp.StatusCode, err, msgs))
			return
		}
		x.add(checkCall(msgs, id, "", want, "", 0))
	}
	for c := range notifiers {
		wg.Go(func() {
			for i := range events {
				notify(crossIDs[(c+i)%len(crossIDs)], events[(c+i)%len(events)])
			}
		})
	}
	for c := range churners {
		wg.Go(func() {
			for i := range churns {
				// Covered by what the stable listens asked for: the
				// gateway's listen is not replaced for them.
				l := openListen(ctx, g, fmt.Sprintf("churn %d/%d", c, i), listenIDs[(c+i)%len(listenIDs)], filters[(c+i)%len(filters)])
				if !l.waitUntil(ctx, acked) {
					msgs, _, err := l.snapshot()
					x.add(false, fmt.Errorf("%s not acknowledged: %q, %v", l.name, msgs, err))
				}
				l.cancel()
				l.waitUntil(ctx, func(_ []json.RawMessage, ended bool) bool { return ended })
				x.add(l.check(false, nil))
			}
		})
	}
	wg.Wait()

	// A listen asking for more: the gateway's listen is replaced by one
	// with the union; the listens it served are served by the next one,
	// without a second acknowledgement.
	prompts := openListen(ctx, g, "prompts listen", `7`, `{"promptsListChanged":true}`)
	if !prompts.waitUntil(ctx, acked) {
		msgs, ended, err := prompts.snapshot()
		t.Fatalf("the prompts listen not acknowledged: %q, ended %v, %v", msgs, ended, err)
	}
	phase3 := []crossEvent{
		{"list_changed", "kind", "prompts"},
		{"list_changed", "kind", "prompts"},
		{"list_changed", "kind", "tools"},
		{"touch", "uri", "mem://dir/y/z"},
	}
	for i, e := range phase3 {
		wg.Go(func() { notify(crossIDs[i%len(crossIDs)], e) })
	}
	wg.Wait()

	// The server ends its one listen: every client listen gets the final
	// result with its own id, after exactly what it selects.
	status, m := modernCall(t, g, "s", `"end"`, "end_listens", map[string]string{}, "")
	var res struct{ Content []struct{ Text string } }
	if status != http.StatusOK || json.Unmarshal(m["result"], &res) != nil || len(res.Content) == 0 || res.Content[0].Text != "1" {
		t.Errorf("end_listens: %d %s %s: want 1 listen open at the server", status, m["result"], m["error"])
	}
	for _, l := range append(stable, prompts) {
		if !l.waitUntil(ctx, func(_ []json.RawMessage, ended bool) bool { return ended }) {
			msgs, _, _ := l.snapshot()
			t.Errorf("%s (id %s) did not end with the server's listen: %q", l.name, l.id, msgs)
			l.cancel()
			continue
		}
		want := map[string]int{}
		count := func(evs []crossEvent, times int) {
			for _, e := range evs {
				method, uri := e.note()
				if l.want.wants(method, uri) {
					key := strings.TrimSpace(method + " " + uri)
					want[key] += times
				}
			}
		}
		if l != prompts {
			count(events, notifiers)
		}
		count(phase3, 1)
		x.add(l.check(true, want))
		msgs, _, _ := l.snapshot()
		t.Logf("%s (id %s, filter %+v): %d messages", l.name, l.id, l.want, len(msgs))
	}
	x.report(t)
	waitGateway(t, g)
}

// TestModernCrossfireVanish: 40 stateless clients x 10 calls on one
// Modern fake, every one with the same ids and tokens; half of the
// clients leave every other call mid-call (the server started it: it sent
// progress 0) or at a random moment, while the rest, and 5 sessions of
// 2025-11-25, go on. Every call left after it started is cancelled
// upstream (the server gets notifications/cancelled for it, once), none
// is left running at the server, and every other call gets its own
// answer.
func TestModernCrossfireVanish(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("s", testkit.FakeOptions{Modern: true})))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const clients, calls, legacyClients = 40, 10, 5
	var x crossTally
	var mu sync.Mutex
	var vanished, maybe []string // left once started; left at a random moment

	// vanish makes a slow call and leaves it: after it started (progress
	// 0) or, random, after a random moment.
	vanish := func(c, i int, random bool) {
		id, token := crossCall(c, i)
		if token == "" {
			token = `"v"`
		}
		mine := fmt.Sprintf("mc%d/%d", c, i)
		cctx, leave := context.WithCancel(ctx)
		defer leave()
		if random {
			mu.Lock()
			maybe = append(maybe, mine)
			mu.Unlock()
			d := time.Duration(rand.IntN(3000)) * time.Microsecond
			time.AfterFunc(d, leave)
		}
		resp, err := crossPost(cctx, g, "tools/call", "slow", crossToolBody(id, "slow", map[string]any{"ms": 600000, "started": true, "message": mine}, token))
		if err != nil {
			if !random || !errors.Is(err, context.Canceled) {
				x.add(false, fmt.Errorf("%s: %v", mine, err))
			}
			return
		}
		first := true
		msgs, err := readMessages(resp, func(raw json.RawMessage) bool {
			if first && !random {
				first = false
				var m crossMsg
				if json.Unmarshal(raw, &m) != nil || m.Method != "notifications/progress" || !bytes.Equal(m.Params.ProgressToken, []byte(token)) || string(m.Params.Progress) != "0" {
					x.add(true, fmt.Errorf("%s: first message %s, want its progress 0", mine, raw))
				}
				mu.Lock()
				vanished = append(vanished, mine)
				mu.Unlock()
				leave()
			}
			return true
		})
		if !random && first {
			x.add(false, fmt.Errorf("%s: ended before it started: status %d, %v, %q", mine, resp.StatusCode, err, msgs))
		}
		for _, raw := range msgs {
			var m crossMsg
			if json.Unmarshal(raw, &m) != nil || m.Method != "notifications/progress" || !bytes.Equal(m.Params.ProgressToken, []byte(token)) {
				x.add(true, fmt.Errorf("%s: got %s", mine, raw))
			}
		}
	}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range calls {
				switch {
				case c%2 == 0 && i%4 == 0:
					vanish(c, i, false)
				case c%2 == 0 && i%4 == 2:
					vanish(c, i, true)
				default:
					modernEcho(ctx, g, &x, c, i)
				}
			}
		})
	}
	for c := range legacyClients {
		wg.Go(func() { legacyCrossClient(ctx, g, &x, c, calls) })
	}
	wg.Wait()
	x.report(t)
	if t.Failed() {
		return
	}

	// Every slow call that reached the server is cancelled there, once;
	// nothing runs there any more.
	var inflight, cancelled []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		inflight, cancelled = fakeCalls(t, g)
		done := len(inflight) == 0
		for _, v := range vanished {
			done = done && slices.Contains(cancelled, "tools/call slow "+v)
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(inflight) != 0 {
		t.Errorf("still running at the server: %q", inflight)
	}
	seen := map[string]int{}
	for _, c := range cancelled {
		seen[c]++
		if seen[c] == 2 {
			t.Errorf("cancelled twice at the server: %s", c)
		}
		if v, ok := strings.CutPrefix(c, "tools/call slow "); !ok || !slices.Contains(vanished, v) && !slices.Contains(maybe, v) {
			t.Errorf("cancelled at the server, but its client stayed: %s", c)
		}
	}
	for _, v := range vanished {
		if seen["tools/call slow "+v] != 1 {
			t.Errorf("%s left mid-call: cancelled %d times at the server, want 1", v, seen["tools/call slow "+v])
		}
	}
	t.Logf("%d calls left after they started, %d at a random moment (%d of all cancelled at the server)", len(vanished), len(maybe), len(cancelled))
	waitGateway(t, g)
}
