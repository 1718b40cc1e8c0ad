package eras

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attacks on how a reverse session's requests end: timeouts, Close,
// Abandon, cancellation, endless and malformed input rounds, the
// client's answers. The harness is in reverse_faults_test.go.

// TestReverseAskNeverAnswered: a client that never answers the gateway's
// request gets its own request failed once, after the timeout and not
// before; nothing stays waiting, no retry goes to the server.
func TestReverseAskNeverAnswered(t *testing.T) {
	leaks := revLeaks(t)
	const timeout = 300 * time.Millisecond
	srv := newRevServer(revDiscoverPlain)
	c, _ := newRevConn(t, srv, timeout)
	revInit(t, c)
	out := &revStream{}
	start := time.Now()
	revHandle(c, revCall("7", 1), out)
	srv.attempt(t, 1).inputRequired(`{"s":{"method":"sampling/createMessage","params":{"maxTokens":1}}}`, `"st"`)
	asks := out.waitAsks(t, 1)
	if !asks[0].MethodIs("sampling/createMessage") || !strings.HasPrefix(string(asks[0].Bytes(asks[0].ID)), `"mcpgate-ask-`) {
		t.Fatalf("the ask: %s", asks[0].Raw)
	}
	reply := out.reply(t)
	if elapsed := time.Since(start); elapsed < timeout {
		t.Errorf("answered after %v, before the timeout %v", elapsed, timeout)
	}
	revWantError(t, reply, "7", protocol.CodeServerError, "timed out")
	// The ask is withdrawn before the answer: nothing will take its result.
	sends, _ := out.got()
	if last := sends[len(sends)-1]; !strings.Contains(last, `"method":"notifications/cancelled"`) ||
		!strings.Contains(last, `"requestId":`+string(asks[0].Bytes(asks[0].ID))) {
		t.Errorf("the last message before the answer: %s; want the ask withdrawn", last)
	}
	leaks() // the request's goroutine is gone, the session still open
	c.mu.Lock()
	waiting, calls := len(c.waiting), c.calls.Len()
	c.mu.Unlock()
	if waiting != 0 || calls != 0 {
		t.Errorf("after the timeout: %d waiting asks, %d calls", waiting, calls)
	}
	// The client's late answer goes nowhere.
	revHandle(c, revResponse(asks[0].Bytes(asks[0].ID), `{"role":"assistant"}`), nil)
	c.Close()
	if n, _ := srv.count(); n != 1 {
		t.Errorf("%d attempts, want 1 (no retry after the timeout)", n)
	}
	if n := out.replyCount(); n != 1 {
		t.Errorf("%d replies, want 1", n)
	}
	leaks()
}

// TestReverseUndeclaredInputNotAsked: a session that did not declare a
// capability is not asked for it (shared mode's rule); the input is left
// out of the retry, and the server decides.
func TestReverseUndeclaredInputNotAsked(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverPlain)
	c, _ := newRevConn(t, srv, 5*time.Second)
	init := &revStream{}
	revHandle(c, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"e","version":"1"}}}`, init)
	init.reply(t)
	out := &revStream{}
	revHandle(c, revCall("1", 1), out)
	srv.attempt(t, 1).inputRequired(`{"a":{"method":"sampling/createMessage","params":{"maxTokens":1}},"b":{"method":"elicitation/create","params":{"message":"m"}}}`, `"st"`)
	asks := out.waitAsks(t, 1)
	if len(asks) != 1 || !asks[0].MethodIs("elicitation/create") {
		t.Fatalf("asked %d, want only the elicitation", len(asks))
	}
	revHandle(c, revResponse(asks[0].Bytes(asks[0].ID), `{"action":"decline"}`), nil)
	retry := srv.attempt(t, 2)
	if got := string(retry.params(t)["inputResponses"]); got != `{"b":{"action":"decline"}}` {
		t.Errorf("inputResponses %s", got)
	}
	retry.reply(`{"content":[]}`)
	if a := revParse(t, out.reply(t)); string(a.id) != "1" || a.code != 0 {
		t.Errorf("answer %+v", a)
	}
	c.Close()
	leaks()
}

// TestReverseCloseInFlight: Close and CloseWith answer a request waiting
// on the client (an ask) or on the server (a round trip) before they
// return, once, with the reason; the upstream attempt is abandoned and
// closed; what comes late is dropped.
func TestReverseCloseInFlight(t *testing.T) {
	for _, stage := range []string{"ask", "round trip"} {
		for _, reason := range []string{"", "the gateway is shutting down"} {
			t.Run(fmt.Sprintf("%s/%q", stage, reason), func(t *testing.T) {
				leaks := revLeaks(t)
				srv := newRevServer(revDiscoverPlain)
				c, _ := newRevConn(t, srv, time.Minute)
				revInit(t, c)
				out := &revStream{}
				revHandle(c, revCall(`"req-1"`, 1), out)
				a := srv.attempt(t, 1)
				var asks []jsonrpc.Message
				if stage == "ask" {
					a.inputRequired(`{"e":{"method":"elicitation/create","params":{"message":"?"}}}`, "")
					asks = out.waitAsks(t, 1)
				}
				if reason == "" {
					c.Close()
				} else {
					c.CloseWith(reason)
				}
				_, replies := out.got() // no waiting: answered before Close returned
				if len(replies) != 1 {
					t.Fatalf("%d replies when Close returned, want 1", len(replies))
				}
				want := errReverseClosed.Error()
				if reason != "" {
					want = "mcpgate: " + reason
				}
				revWantError(t, replies[0], `"req-1"`, protocol.CodeServerError, want)
				if stage == "round trip" {
					testkit.WaitFor(t, "the attempt abandoned and closed", a.done)
					a.reply(`{"late":true}`)
				} else {
					revHandle(c, revResponse(asks[0].Bytes(asks[0].ID), `{"action":"accept"}`), nil)
				}
				leaks()
				if n := out.replyCount(); n != 1 {
					t.Errorf("%d replies, want 1", n)
				}
				if n, _ := srv.count(); n != 1 {
					t.Errorf("%d attempts, want 1", n)
				}
				// A request after Close is refused at once, with its id.
				late := &revStream{}
				revHandle(c, revCall("2", 2), late)
				if _, replies := late.got(); len(replies) != 1 {
					t.Fatalf("a request after Close: %d replies at once", len(replies))
				} else {
					revWantError(t, replies[0], "2", protocol.CodeServerError, "closed")
				}
				leaks()
			})
		}
	}
}

// TestReverseCloseRacesRequests: requests arriving while the session
// closes each get exactly one answer with their own id, whichever wins.
func TestReverseCloseRacesRequests(t *testing.T) {
	leaks := revLeaks(t)
	for round := 0; round < 20; round++ {
		srv := newRevServer(revDiscoverPlain)
		var answered atomic.Int64
		srv.respond = func(a *revAttempt) {
			if answered.Add(1)%3 == 0 {
				return // left to the server: only Close answers it
			}
			a.reply(`{"ok":true}`)
		}
		c, _ := newRevConn(t, srv, time.Minute)
		revInit(t, c)
		const n = 40
		outs := make([]*revStream, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range outs {
			outs[i] = &revStream{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				revHandle(c, revCall(fmt.Sprint(i), i), outs[i])
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c.CloseWith("racing")
		}()
		close(start)
		wg.Wait()
		for i, out := range outs {
			testkit.WaitFor(t, fmt.Sprintf("request %d answered", i), func() bool { return out.replyCount() > 0 })
		}
		leaks()
		for i, out := range outs {
			_, replies := out.got()
			if len(replies) != 1 {
				t.Fatalf("request %d: %d replies: %q", i, len(replies), replies)
			}
			a := revParse(t, replies[0])
			if string(a.id) != fmt.Sprint(i) {
				t.Fatalf("request %d answered with id %s", i, a.id)
			}
			if a.result == nil && !strings.Contains(a.message, "racing") && !strings.Contains(a.message, "closed") {
				t.Fatalf("request %d: %s", i, replies[0])
			}
		}
	}
}

// TestReverseAbandon: the requests of a stream whose client left get no
// answer, waiting on the server (the attempt abandoned) or on the client;
// another stream's request with the same id is unaffected.
func TestReverseAbandon(t *testing.T) {
	for _, stage := range []string{"ask", "round trip"} {
		t.Run(stage, func(t *testing.T) {
			leaks := revLeaks(t)
			srv := newRevServer(revDiscoverPlain)
			c, _ := newRevConn(t, srv, time.Minute)
			revInit(t, c)
			gone, stays := &revStream{}, &revStream{}
			revHandle(c, revCall("1", 1), gone)
			a1 := srv.attempt(t, 1)
			revHandle(c, revCall("1", 2), stays)
			a2 := srv.attempt(t, 2)
			var asks []jsonrpc.Message
			if stage == "ask" {
				a1.inputRequired(`{"r":{"method":"roots/list"}}`, `"s"`)
				asks = gone.waitAsks(t, 1)
			}
			c.Abandon(gone)
			if stage == "round trip" {
				testkit.WaitFor(t, "the attempt abandoned and closed", a1.done)
			} else {
				// Wait until the ask is given up, then answer it late.
				testkit.WaitFor(t, "the ask given up", func() bool {
					c.mu.Lock()
					defer c.mu.Unlock()
					return len(c.waiting) == 0
				})
				revHandle(c, revResponse(asks[0].Bytes(asks[0].ID), `{"roots":[]}`), nil)
			}
			if a2.abandoned.Load() {
				t.Fatal("the other stream's attempt was abandoned")
			}
			a2.reply(`{"n":2}`)
			if got := stays.reply(t); !strings.Contains(got, `"n":2`) {
				t.Fatalf("the other stream: %s", got)
			}
			leaks()
			c.Close()
			if n := gone.replyCount(); n != 0 {
				t.Errorf("the abandoned stream got %d replies", n)
			}
			if n := stays.replyCount(); n != 1 {
				t.Errorf("the other stream got %d replies", n)
			}
			if n, _ := srv.count(); n != 2 {
				t.Errorf("%d attempts, want 2 (no retry for the abandoned request)", n)
			}
			leaks()
		})
	}
}

// TestReverseClientCancelled: notifications/cancelled ends the request
// without an answer (Reply(nil), once), cancels its attempt upstream, and
// matches only the id it names, byte for byte.
func TestReverseClientCancelled(t *testing.T) {
	for _, stage := range []string{"ask", "round trip"} {
		t.Run(stage, func(t *testing.T) {
			leaks := revLeaks(t)
			srv := newRevServer(revDiscoverPlain)
			c, _ := newRevConn(t, srv, time.Minute)
			revInit(t, c)
			cancelled, other := &revStream{}, &revStream{}
			revHandle(c, revCall(`"x"`, 1), cancelled)
			a1 := srv.attempt(t, 1)
			revHandle(c, revCall("1", 2), other)
			a2 := srv.attempt(t, 2)
			var asks []jsonrpc.Message
			if stage == "ask" {
				a1.inputRequired(`{"s":{"method":"sampling/createMessage","params":{}}}`, "")
				asks = cancelled.waitAsks(t, 1)
			}
			// Ids that are not "x" byte for byte cancel nothing.
			revHandle(c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"1"}}`, nil)
			revHandle(c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"X"}}`, nil)
			revHandle(c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, nil)
			if cancelled.replyCount() != 0 || other.replyCount() != 0 || a2.abandoned.Load() {
				t.Fatal("a cancellation naming another id ended a request")
			}
			revHandle(c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x","reason":"user"}}`, nil)
			if _, replies := cancelled.got(); len(replies) != 1 || replies[0] != "" {
				t.Fatalf("cancelled request: replies %q, want one nil", replies)
			}
			if stage == "round trip" {
				testkit.WaitFor(t, "the attempt abandoned and closed", a1.done)
				a1.reply(`{"late":true}`)
			} else {
				revHandle(c, revResponse(asks[0].Bytes(asks[0].ID), `{"role":"assistant"}`), nil)
			}
			a2.reply(`{"n":2}`)
			other.reply(t)
			leaks()
			if _, replies := cancelled.got(); len(replies) != 1 {
				t.Errorf("cancelled request: %d replies", len(replies))
			}
			if n, _ := srv.count(); n != 2 {
				t.Errorf("%d attempts, want 2 (no retry of the cancelled request)", n)
			}
			c.Close()
			if n := cancelled.replyCount() + other.replyCount(); n != 2 {
				t.Errorf("Close answered a finished request: %d replies", n)
			}
			leaks()
		})
	}
}

// TestReverseInputRequiredForever: a server that asks forever gets a
// bounded number of rounds; the client one error with its id.
func TestReverseInputRequiredForever(t *testing.T) {
	for _, kind := range []string{"asks", "state only"} {
		t.Run(kind, func(t *testing.T) {
			leaks := revLeaks(t)
			srv := newRevServer(revDiscoverPlain)
			srv.respond = func(a *revAttempt) {
				if kind == "asks" {
					a.inputRequired(`{"r":{"method":"roots/list"}}`, `"again"`)
				} else {
					a.inputRequired("", `"again"`)
				}
			}
			c, _ := newRevConn(t, srv, time.Minute)
			revInit(t, c)
			out := &revStream{conn: c, answer: func(id []byte, _ string) []byte {
				return jsonrpc.Response(id, []byte(`{"roots":[]}`))
			}}
			revHandle(c, revCall("1e3", 1), out)
			reply := out.reply(t)
			revWantError(t, reply, "1e3", protocol.CodeInternalError, fmt.Sprintf("after %d rounds", reverseRounds))
			leaks()
			if n := out.replyCount(); n != 1 {
				t.Errorf("%d replies", n)
			}
			if n, _ := srv.count(); n != reverseRounds {
				t.Errorf("%d attempts, want %d", n, reverseRounds)
			}
			ids := map[string]bool{}
			for i := 1; i <= reverseRounds; i++ {
				a := srv.attempt(t, i)
				ids[string(a.id)] = true
				p := a.params(t)
				if i == 1 {
					if string(a.id) != "1e3" || p["requestState"] != nil || p["inputResponses"] != nil {
						t.Errorf("first attempt: %s", a.raw)
					}
					continue
				}
				if !strings.HasPrefix(string(a.id), `"mcpgate-retry-`) || string(p["requestState"]) != `"again"` {
					t.Errorf("retry %d: %s", i, a.raw)
				}
				want := `{}`
				if kind == "asks" {
					want = `{"r":{"roots":[]}}`
				}
				if string(p["inputResponses"]) != want {
					t.Errorf("retry %d inputResponses %s, want %s", i, p["inputResponses"], want)
				}
			}
			if len(ids) != reverseRounds {
				t.Errorf("attempt ids repeat: %v", ids)
			}
			if sends, _ := out.got(); kind == "state only" && len(sends) != 0 {
				t.Errorf("asks with nothing to ask: %q", sends)
			}
			c.Close()
			leaks()
		})
	}
}

// TestReverseMalformedInputRequired: an input_required result the bridge
// cannot act on is one error, nothing asked, nothing retried.
func TestReverseMalformedInputRequired(t *testing.T) {
	many := map[string]json.RawMessage{}
	for i := range 33 {
		many[fmt.Sprint("k", i)] = json.RawMessage(`{"method":"roots/list"}`)
	}
	manyJSON, _ := json.Marshal(many)
	for name, result := range map[string]string{
		"bad method":       `{"resultType":"input_required","inputRequests":{"a":{"method":"tools/call","params":{}}}}`,
		"no method":        `{"resultType":"input_required","inputRequests":{"a":{"params":{}}}}`,
		"request a string": `{"resultType":"input_required","inputRequests":{"a":"roots/list"}}`,
		"state a number":   `{"resultType":"input_required","inputRequests":{"a":{"method":"roots/list"}},"requestState":5}`,
		"state an object":  `{"resultType":"input_required","requestState":{"s":1}}`,
		"neither":          `{"resultType":"input_required"}`,
		"null both":        `{"resultType":"input_required","inputRequests":null,"requestState":null}`,
		"too many":         `{"resultType":"input_required","inputRequests":` + string(manyJSON) + `}`,
	} {
		t.Run(name, func(t *testing.T) {
			leaks := revLeaks(t)
			srv := newRevServer(revDiscoverPlain)
			srv.respond = func(a *revAttempt) { a.reply(result) }
			c, _ := newRevConn(t, srv, time.Minute)
			revInit(t, c)
			out := &revStream{}
			revHandle(c, revCall("-0", 1), out)
			reply := out.reply(t)
			leaks()
			revWantError(t, reply, "-0", protocol.CodeInternalError, "the server's answer")
			sends, replies := out.got()
			if len(replies) != 1 || len(sends) != 0 {
				t.Errorf("replies %q, sends %q", replies, sends)
			}
			if n, _ := srv.count(); n != 1 {
				t.Errorf("%d attempts", n)
			}
			c.Close()
		})
	}
}

// TestReverseClientAnswers: the client's answers to the gateway's
// requests: an error leaves the input out, a second answer is ignored, an
// unknown id is dropped, and an id of another session's ask (the same
// text: counters are per session) answers only this session's ask.
func TestReverseClientAnswers(t *testing.T) {
	t.Run("error and twice and unknown", func(t *testing.T) {
		leaks := revLeaks(t)
		srv := newRevServer(revDiscoverPlain)
		c, _ := newRevConn(t, srv, time.Minute)
		revInit(t, c)
		out := &revStream{}
		revHandle(c, revCall("1", 1), out)
		srv.attempt(t, 1).inputRequired(`{"a":{"method":"sampling/createMessage","params":{}},"b":{"method":"elicitation/create","params":{}},"c":{"method":"roots/list"}}`, `"s1"`)
		asks := out.waitAsks(t, 3)
		idOf := map[string][]byte{}
		for _, m := range asks {
			idOf[m.MethodName()] = m.Bytes(m.ID)
		}
		if len(idOf) != 3 {
			t.Fatalf("asks: %d distinct methods", len(idOf))
		}
		// Unknown ids, and answers that are not results, first.
		revHandle(c, revResponse([]byte(`"mcpgate-ask-999"`), `{"bogus":1}`), nil)
		revHandle(c, revResponse([]byte(`1`), `{"bogus":2}`), nil)
		revHandle(c, string(jsonrpc.ErrorResponse(idOf["sampling/createMessage"], -1, "declined")), nil)
		revHandle(c, revResponse(idOf["elicitation/create"], `{"action":"accept"}`), nil)
		revHandle(c, revResponse(idOf["elicitation/create"], `{"action":"decline"}`), nil)
		revHandle(c, revResponse(idOf["roots/list"], `[1]`), nil) // not an object: as an error
		a2 := srv.attempt(t, 2)
		p := a2.params(t)
		if got := string(p["inputResponses"]); got != `{"b":{"action":"accept"}}` {
			t.Errorf("inputResponses %s", got)
		}
		if got := string(p["requestState"]); got != `"s1"` {
			t.Errorf("requestState %s", got)
		}
		a2.reply(`{"done":true}`)
		revParse(t, out.reply(t))
		leaks()
		if n := out.replyCount(); n != 1 {
			t.Errorf("%d replies", n)
		}
		c.Close()
	})
	t.Run("another session's id", func(t *testing.T) {
		leaks := revLeaks(t)
		srvA, srvB := newRevServer(revDiscoverPlain), newRevServer(revDiscoverPlain)
		a, _ := newRevConn(t, srvA, time.Minute)
		b, _ := newRevConn(t, srvB, time.Minute)
		revInit(t, a)
		revInit(t, b)
		outA, outB := &revStream{}, &revStream{}
		revHandle(a, revCall("1", 1), outA)
		srvA.attempt(t, 1).inputRequired(`{"r":{"method":"roots/list"}}`, "")
		askA := outA.waitAsks(t, 1)[0]
		// B's client answers A's ask: B waits for nothing, A must not hear it.
		revHandle(b, revResponse(askA.Bytes(askA.ID), `{"roots":[{"uri":"file:///b"}]}`), nil)
		a.mu.Lock()
		stillWaiting := a.waiting[string(askA.Bytes(askA.ID))] != nil
		a.mu.Unlock()
		if !stillWaiting {
			t.Fatal("A's ask was given up after B's answer")
		}
		// B asks too, with the same gateway id.
		revHandle(b, revCall("1", 1), outB)
		srvB.attempt(t, 1).inputRequired(`{"r":{"method":"roots/list"}}`, "")
		askB := outB.waitAsks(t, 1)[0]
		if string(askA.Bytes(askA.ID)) != string(askB.Bytes(askB.ID)) {
			t.Logf("ids differ (%s, %s): the collision is not exercised", askA.Bytes(askA.ID), askB.Bytes(askB.ID))
		}
		revHandle(b, revResponse(askB.Bytes(askB.ID), `{"roots":[{"uri":"file:///b"}]}`), nil)
		retryB := srvB.attempt(t, 2)
		revHandle(a, revResponse(askA.Bytes(askA.ID), `{"roots":[{"uri":"file:///a"}]}`), nil)
		retryA := srvA.attempt(t, 2)
		if got := string(retryA.params(t)["inputResponses"]); got != `{"r":{"roots":[{"uri":"file:///a"}]}}` {
			t.Errorf("A's retry: %s", got)
		}
		if got := string(retryB.params(t)["inputResponses"]); got != `{"r":{"roots":[{"uri":"file:///b"}]}}` {
			t.Errorf("B's retry: %s", got)
		}
		if sends, _ := outB.got(); len(sends) != 1 {
			t.Errorf("B's client got %d messages, want its own ask only", len(sends))
		}
		if sends, _ := outA.got(); len(sends) != 1 {
			t.Errorf("A's client got %d messages, want its own ask only", len(sends))
		}
		a.Close()
		b.Close()
		revWantError(t, outA.reply(t), "1", protocol.CodeServerError, "closed")
		revWantError(t, outB.reply(t), "1", protocol.CodeServerError, "closed")
		leaks()
	})
}
