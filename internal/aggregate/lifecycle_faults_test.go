package aggregate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attacks on the endpoint's lifecycle: members hung, killed, flooding;
// sessions and the endpoint closed while everything is under way; clients
// leaving, cancelling and reusing ids at the worst moment; the stateless
// path; many short sessions.

// TestFaultHungListMember: a member that never answers tools/list (its
// timeout 3s) beside one that does: every session's list is answered
// within the timeout with the other's tools, a call to the other's tool
// waits for the hung list once at most, and not again while the hung
// member's list stays failed.
func TestFaultHungListMember(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ListDelay: time.Hour}})
	// Long enough that "answered before b's timeout" tells a call that
	// waited for b apart from one slowed by a busy machine.
	b.Timeout = 3 * time.Second
	e := newEndpoint(t, Options{}, a, b)
	const sessions = 8
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			general := newStream()
			conn, err := e.Open(t.Context(), general)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			cl := &client{t: t, conn: conn, general: general}
			do := func(raw string) ([]byte, time.Duration) {
				out := newStream()
				start := time.Now()
				cl.sendTo(raw, out)
				select {
				case r := <-out.replied:
					return r, time.Since(start)
				case <-time.After(wait):
					t.Errorf("session %d: %s: no reply", s, raw)
					return nil, wait
				}
			}
			if r, _ := do(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); !strings.Contains(string(r), `"result"`) {
				t.Errorf("session %d: initialize %s", s, r)
				return
			}
			var r []byte
			var d time.Duration
			if s%2 == 0 {
				r, d = do(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
				if strings.Contains(string(r), `"b__`) || !strings.Contains(string(r), `"a__echo"`) {
					t.Errorf("session %d: list %.300s, want a's tools only", s, r)
				}
			} else {
				r, d = do(toolCall("1", "a__echo", `{"message":"first"}`))
				if got := text(t, r); got != "first" {
					t.Errorf("session %d: first call %q", s, got)
				}
			}
			if d > b.Timeout+3*time.Second {
				t.Errorf("session %d: first request answered after %v, b's timeout is %v", s, d, b.Timeout)
			}
			// b's list failed: a's tools are routed without waiting for
			// it again.
			r, d = do(toolCall("2", "a__echo", `{"message":"second"}`))
			if got := text(t, r); got != "second" || d >= b.Timeout {
				t.Errorf("session %d: second call %q after %v: want it answered before b's timeout (%v) again", s, got, d, b.Timeout)
			}
			// b's tools say why they cannot be called.
			r, _ = do(toolCall("3", "b__echo", `{}`))
			if got := text(t, r); !strings.Contains(got, `server "b" did not list its tools`) {
				t.Errorf("session %d: b__echo: %q", s, got)
			}
		})
	}
	wg.Wait()
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
}

// TestFaultMemberKilledMidCall: a member's process killed while every
// session has a call in flight on it: those calls are answered with an
// error at once, the other member's calls in flight complete, and the
// killed member serves again once restarted.
func TestFaultMemberKilledMidCall(t *testing.T) {
	ma := marker(t, "a")
	a := fakeMember(t, "a", testkit.FakeOptions{Marker: ma})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{PollInterval: 5 * time.Millisecond}, a, b)
	const sessions = 6
	clients := make([]*client, sessions)
	var onA, onB []*stream
	for s := range clients {
		cl := connect(t, e, `{}`)
		clients[s] = cl
		cl.tools()
		sa := cl.send(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a__slow","arguments":{"ms":3600000,"started":true},"_meta":{"progressToken":1}}}`)
		sb := cl.send(`{"jsonrpc":"2.0","id":"y","method":"tools/call","params":{"name":"b__slow","arguments":{"ms":1500,"started":true},"_meta":{"progressToken":1}}}`)
		sa.next(t) // written to a's process
		sb.next(t)
		onA, onB = append(onA, sa), append(onB, sb)
	}
	pids := testkit.Procs(ma)
	if len(pids) != 1 {
		t.Fatalf("a's processes %v", pids)
	}
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for s, sa := range onA {
		r := string(sa.reply(t))
		if !strings.HasPrefix(r, `{"jsonrpc":"2.0","id":"x","error"`) {
			t.Errorf("session %d: a's call: %s, want an error with its id", s, r)
		}
		if d := time.Since(killed); d > 5*time.Second {
			t.Errorf("session %d: a's call answered %v after the kill", s, d)
		}
	}
	for s, cl := range clients {
		if got := text(t, cl.callTool(7, "b__echo", `{"message":"b"}`)); got != "b" {
			t.Errorf("session %d: b__echo while a restarts: %q", s, got)
		}
	}
	for s, sb := range onB {
		if got := text(t, sb.reply(t)); got != "done" {
			t.Errorf("session %d: b's call in flight: %q", s, got)
		}
	}
	for s, cl := range clients {
		testkit.WaitFor(t, "a back", func() bool {
			return text(t, cl.callTool(8, "a__echo", `{"message":"back"}`)) == "back"
		})
		if n := onA[s].replyCount() + onB[s].replyCount(); n != 2 {
			t.Errorf("session %d: %d replies to its two calls", s, n)
		}
	}
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
}

// TestFaultListChangedStorm: two members each announce 20,000 list
// changes while sessions list: each session hears a handful of
// notifications (coalesced), every list is answered, and the goroutines
// return to what they were.
func TestFaultListChangedStorm(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a, b)
	const sessions = 4
	clients := make([]*client, sessions)
	for s := range clients {
		clients[s] = connect(t, e, `{}`)
		clients[s].tools()
	}
	base := testkit.SettleGoroutines(t, "before", runtime.NumGoroutine(), nil)
	start := time.Now()
	var storm sync.WaitGroup
	for _, call := range []string{
		toolCall(`"storm-a"`, "a__list_changed", `{"kind":"tools","count":20000}`),
		toolCall(`"storm-b"`, "b__list_changed", `{"kind":"prompts","count":20000}`),
	} {
		storm.Go(func() {
			out := newStream()
			clients[0].sendTo(call, out)
			select {
			case r := <-out.replied:
				if got := text(t, r); got != "ok" {
					t.Errorf("storm: %q", got)
				}
			case <-time.After(wait):
				t.Error("storm: no reply")
			}
		})
	}
	done := make(chan struct{})
	var lists sync.WaitGroup
	var listed atomic.Int64
	for s, cl := range clients {
		lists.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				out := newStream()
				cl.sendTo(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, n), out)
				select {
				case r := <-out.replied:
					if !strings.Contains(string(r), `"result"`) {
						t.Errorf("session %d: list during the storm: %.200s", s, r)
					}
					listed.Add(1)
				case <-time.After(wait):
					t.Errorf("session %d: list during the storm: no reply", s)
					return
				}
			}
		})
	}
	storm.Wait()
	close(done)
	lists.Wait()
	// The last notifications are flushed within listChangedDelay of the
	// storm's last; the stream is read until then.
	for _, cl := range clients {
		cl.general.waitNotification(t, "notifications/prompts/list_changed")
	}
	elapsed := time.Since(start)
	bound := 2*int(elapsed/listChangedDelay) + 8
	for s, cl := range clients {
		n := cl.general.countSent("list_changed")
		t.Logf("session %d: %d list_changed notifications for 40,000 changes in %v (%d lists)", s, n, elapsed, listed.Load())
		if n > bound {
			t.Errorf("session %d: %d list_changed notifications in %v, want at most %d (coalesced)", s, n, elapsed, bound)
		}
	}
	for s, cl := range clients {
		if n := len(cl.tools()); n != 2*builtinTools {
			t.Errorf("session %d: %d tools after the storm", s, n)
		}
	}
	testkit.SettleGoroutines(t, "after the storm", base+4, nil)
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
}

// requests sent in the races below: each must be answered exactly once.
var raceRequests = []string{
	`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
	toolCall("2", "a__echo", `{"message":"m"}`),
	toolCall("3", "b__slow", `{"ms":30}`),
	toolCall("4", "hung__echo", `{}`),
	`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"mem://a"}}`,
	`{"jsonrpc":"2.0","id":6,"method":"prompts/list"}`,
	`{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"debug"}}`,
	toolCall("8", "a__slow", `{"ms":3600000}`),
}

// fire sends every race request to conn on streams of its own, each from
// a goroutine of its own, and returns the streams at once.
func fire(t *testing.T, conn conn.Conn, wg *sync.WaitGroup) []*stream {
	outs := make([]*stream, len(raceRequests))
	for j, raw := range raceRequests {
		outs[j] = newStream()
		wg.Go(func() {
			m, err := jsonrpc.Parse([]byte(raw))
			if err != nil {
				t.Error(err)
				return
			}
			conn.Handle(context.Background(), &m, outs[j])
		})
	}
	return outs
}

// answeredOnce checks that each stream got exactly one reply, with its
// request's id, and returns how many were results.
func answeredOnce(t *testing.T, what string, outs []*stream) (results int) {
	t.Helper()
	for j, out := range outs {
		r := out.replyWithin(t, wait, fmt.Sprintf("%s: request %d", what, j%len(raceRequests)))
		if id := idOf(t, []byte(raceRequests[j%len(raceRequests)])); !strings.HasPrefix(string(r), `{"jsonrpc":"2.0","id":`+id+`,`) {
			t.Errorf("%s: request %d: %s, want its id %s", what, j, r, id)
		}
		if strings.Contains(string(r), `"result"`) {
			results++
		}
	}
	return results
}

// until polls cond for the bound of every wait, from any goroutine.
func until(cond func() bool) bool {
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// closeBound is what a Close racing everything may take. A Close that
// waited for its members would wait for the hour-long call; a busy machine
// takes a fraction of this.
const closeBound = 30 * time.Second

// racingMembers returns shared members a and b and a member "hung" whose
// tools/list never comes, within its timeout.
func racingMembers(t *testing.T, hungTimeout time.Duration) []Member {
	hung := fakeMember(t, "hung", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ListDelay: time.Hour}})
	hung.Timeout = hungTimeout
	return []Member{fakeMember(t, "a", testkit.FakeOptions{}), fakeMember(t, "b", testkit.FakeOptions{}), hung}
}

// TestFaultCloseRacesEverything: a session closed while its initialize,
// lists (waiting for a hung member), calls (one at a member for an hour),
// reads and setLevel are under way, at moments from "at once" to "once
// calls reached the members"; an endpoint closed while sessions open,
// initialize and call. Every request is answered exactly once, with its
// id; Close returns at once; nothing stays pending.
func TestFaultCloseRacesEverything(t *testing.T) {
	members := racingMembers(t, 200*time.Millisecond)
	e := newEndpoint(t, Options{}, members...)
	total := 0
	for iter := range 40 {
		general := newStream()
		c, err := e.Open(t.Context(), general)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		outs := fire(t, c, &wg)
		wg.Go(func() {
			switch iter % 4 {
			case 0:
				for range rand.IntN(2000) {
					runtime.Gosched()
				}
			case 1: // initialized
				until(func() bool { return outs[0].replyCount() > 0 })
			case 2: // a call answered: the others are at their members
				until(func() bool { return outs[2].replyCount() > 0 })
			case 3: // the hour-long call written to a
				until(func() bool { return outs[5].replyCount() > 0 && outs[2].replyCount() > 0 })
			}
			start := time.Now()
			c.CloseWith("the client deleted the session")
			c.Close()
			if d := time.Since(start); d >= closeBound {
				t.Errorf("iteration %d: Close took %v", iter, d)
			}
		})
		wg.Wait()
		total += answeredOnce(t, fmt.Sprintf("iteration %d", iter), outs)
		// After Close: refused at once.
		var after sync.WaitGroup
		late := fire(t, c, &after)
		after.Wait()
		answeredOnce(t, fmt.Sprintf("iteration %d, after Close", iter), late)
		for _, o := range late {
			o.mu.Lock()
			r := string(o.replies[0])
			o.mu.Unlock()
			if !strings.Contains(r, "the client deleted the session") {
				t.Errorf("iteration %d: after Close: %s", iter, r)
			}
		}
	}
	t.Logf("sessions: %d of %d requests answered with a result before Close", total, 40*len(raceRequests))
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })

	// The endpoint itself, closed while sessions open and work.
	total = 0
	for iter := range 15 {
		ep, err := New(Options{Name: "racing", Logger: e.opts.Logger}, members)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var all []*stream
		for range 6 {
			wg.Go(func() {
				conn, err := ep.Open(t.Context(), newStream())
				if err != nil {
					if !strings.Contains(err.Error(), "shutting down") {
						t.Errorf("Open racing Close: %v", err)
					}
					return
				}
				o := fire(t, conn, &wg)
				mu.Lock()
				all = append(all, o...)
				mu.Unlock()
			})
		}
		wg.Go(func() {
			switch iter % 3 {
			case 0:
				for range rand.IntN(5000) {
					runtime.Gosched()
				}
			default: // some calls answered, others at their members
				until(func() bool {
					mu.Lock()
					defer mu.Unlock()
					for j := 2; j < len(all); j += len(raceRequests) {
						if all[j].replyCount() > 0 {
							return true
						}
					}
					return false
				})
			}
			start := time.Now()
			ep.Close()
			if d := time.Since(start); d >= closeBound {
				t.Errorf("endpoint iteration %d: Close took %v", iter, d)
			}
		})
		wg.Wait()
		ep.Close()
		total += answeredOnce(t, fmt.Sprintf("endpoint iteration %d", iter), all)
		if _, err := ep.Open(t.Context(), newStream()); err == nil {
			t.Errorf("endpoint iteration %d: Open after Close succeeded", iter)
		}
		testkit.WaitFor(t, "nothing pending", func() bool { return ep.Pending() == 0 })
		ep.mu.Lock()
		left := len(ep.sessions)
		ep.mu.Unlock()
		if left != 0 {
			t.Errorf("endpoint iteration %d: %d sessions left after Close", iter, left)
		}
		for j, o := range all {
			if n := o.replyCount(); n != 1 {
				t.Errorf("endpoint iteration %d: request %d answered %d times", iter, j, n)
			}
		}
	}
	t.Logf("endpoints: %d requests answered with a result before Close", total)
}

// TestFaultAbandonMidList: a list waiting for a hung member, and a call
// waiting for names, abandoned: no reply ever, nothing of the client's
// left pending; a later request and Close still answered.
func TestFaultAbandonMidList(t *testing.T) {
	// The hung member's timeout is far beyond testkit.WaitTimeout: nothing
	// pending at the end is the work of Close, not of that timeout.
	members := racingMembers(t, 10*time.Minute)
	e := newEndpoint(t, Options{}, members...)
	cl := connect(t, e, `{}`)
	c := cl.conn.(*clientSession)
	list := cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	call := cl.send(toolCall("2", "a__echo", `{"message":"m"}`))
	shared := newStream()
	cl.sendTo(`{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`, shared)
	cl.sendTo(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, shared)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pending %d; replies: list %d, call %d, shared %d", e.Pending(), list.replyCount(), call.replyCount(), shared.replyCount())
		}
	})
	testkit.WaitFor(t, "the lists waiting", func() bool { return e.Pending() >= 4 })
	cl.conn.Abandon(list)
	cl.conn.Abandon(call)
	cl.conn.Abandon(shared)
	// The prompts/list on shared waits for no hung list: on a busy machine
	// it may be answered before its Abandon (CI beside a CPU hog saw it),
	// which is allowed; nothing may be written after.
	sharedBefore := shared.replyCount()
	left := c.calls.Len()
	if left != 0 {
		t.Errorf("%d requests of the client pending after Abandon", left)
	}
	// The loads go on for the session (bounded by the hung member's
	// timeout); the client's requests are gone.
	later := cl.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	cl.conn.Close()
	if r := string(later.reply(t)); !strings.Contains(r, "session closed") {
		t.Errorf("list after the abandoned ones, at Close: %s", r)
	}
	for _, s := range []*stream{list, call} {
		if n := s.replyCount(); n != 0 {
			t.Errorf("an abandoned stream got %d replies", n)
		}
	}
	if n := shared.replyCount(); n != sharedBefore {
		t.Errorf("the abandoned shared stream got %d replies after its Abandon", n-sharedBefore)
	}
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
}

// TestFaultEndedBeforeTheMemberSawIt: a call the endpoint has decided to
// forward but the member has not yet taken (held between them), ended
// meanwhile by the client leaving, by its cancellation or by the member's
// timeout: once the member takes it, it is cancelled there too, never
// left running with nobody to answer.
func TestFaultEndedBeforeTheMemberSawIt(t *testing.T) {
	for _, how := range []string{"abandon", "cancel", "timeout"} {
		t.Run(how, func(t *testing.T) {
			g := newGate("slow")
			a := fakeMember(t, "a", testkit.FakeOptions{})
			a.Backend = &gateBackend{Backend: a.Backend, hold: g.hold}
			if how == "timeout" {
				// Long enough for the listing and the in-flight probes
				// of a busy machine; the held call still times out.
				a.Timeout = 2 * time.Second
				waitReady(t, a) // the timeout bounds a start too: the test is of the call
			}
			e := newEndpoint(t, Options{}, a)
			cl := connect(t, e, `{}`)
			cl.tools()
			out := newStream()
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				cl.sendTo(toolCall(`"held"`, "a__slow", `{"ms":3600000}`), out)
			}()
			g.waitEntered(t)
			switch how {
			case "abandon":
				cl.conn.Abandon(out)
			case "cancel":
				cl.handle(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"held"}}`, nil)
			case "timeout":
				if r := string(out.reply(t)); !strings.Contains(r, "-32001") {
					t.Errorf("timeout: %s", r)
				}
			}
			close(g.released)
			<-sent
			testkit.WaitFor(t, "the held call cancelled at the member", func() bool {
				return !slices.Contains(inflightAt(t, cl, "a"), "tools/call slow")
			})
			// Abandoned: nothing; cancelled: the nil that says "no reply";
			// timed out: the error.
			out.mu.Lock()
			replies := slices.Clone(out.replies)
			out.mu.Unlock()
			switch {
			case how == "abandon" && len(replies) != 0,
				how == "cancel" && (len(replies) != 1 || replies[0] != nil),
				how == "timeout" && len(replies) != 1:
				t.Errorf("replies %q", replies)
			}
			testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
		})
	}
}

// TestFaultTimeoutThenSameID: a client that reuses the id of a call the
// moment its timeout is answered (allowed: the id is no longer in flight)
// gets its new call answered, not cancelled by the old one's cancellation.
func TestFaultTimeoutThenSameID(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	a.Timeout = 2 * time.Second // the second call (100 ms) must fit in it on a busy machine
	waitReady(t, a)             // the timeout bounds a start too: the test is of the call
	e := newEndpoint(t, Options{}, a)
	cl := connect(t, e, `{}`)
	cl.tools()
	second := newStream()
	first := &hookStream{stream: newStream()}
	first.onReply = func([]byte) {
		cl.sendTo(toolCall(`"same"`, "a__slow", `{"ms":100}`), second)
	}
	cl.sendTo(toolCall(`"same"`, "a__slow", `{"ms":3600000}`), first)
	if r := string(first.reply(t)); !strings.Contains(r, "-32001") {
		t.Fatalf("first call: %s, want its timeout", r)
	}
	r := second.reply(t)
	if r == nil || text(t, r) != "done" {
		t.Errorf("second call under the same id: %q, want it answered (done)", r)
	}
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
}
