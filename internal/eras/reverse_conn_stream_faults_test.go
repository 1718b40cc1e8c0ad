package eras

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attacks on what a reverse session's streams carry: ids byte for byte,
// odd server replies, progress, the listen, local methods, concurrency.
// The harness is in reverse_faults_test.go.

// TestReverseIDsByteForByte: the client gets its id back byte for byte,
// whether the server echoes it, re-encodes it, or the final answer comes
// from a retry (a request of the gateway's id); the first attempt carries
// it byte for byte too.
func TestReverseIDsByteForByte(t *testing.T) {
	leaks := revLeaks(t)
	ids := []string{`1.0`, `"x"`, `-0`, `1e3`, `0.1E-2`, `"\u00e9"`, `12345678901234567890123`, `"mcpgate-retry-2"`, `"mcpgate-ask-1"`, `""`}
	for _, mode := range []string{"echo", "re-encoded", "retry", "error", "closed"} {
		srv := newRevServer(revDiscoverPlain)
		srv.respond = func(a *revAttempt) {
			switch mode {
			case "echo":
				a.reply(`{"ok":true}`)
			case "re-encoded":
				var v any
				_ = json.Unmarshal(a.id, &v)
				b, _ := json.Marshal(v)
				a.out.Reply(jsonrpc.Response(b, []byte(`{"ok":true}`)))
			case "retry":
				if a.params(t)["requestState"] == nil {
					a.inputRequired("", `"s"`)
				} else {
					a.reply(`{"ok":true}`)
				}
			case "error":
				a.out.Reply(jsonrpc.ErrorResponse(a.id, -32602, "bad"))
			}
		}
		c, _ := newRevConn(t, srv, time.Minute)
		revInit(t, c)
		outs := make([]*revStream, len(ids))
		for i, id := range ids {
			outs[i] = &revStream{}
			revHandle(c, revCall(id, i), outs[i])
		}
		if mode == "closed" {
			testkit.WaitFor(t, "all attempts", func() bool { n, _ := srv.count(); return n == len(ids) })
			c.Close()
		}
		for i, id := range ids {
			a := revParse(t, outs[i].reply(t))
			if string(a.id) != id {
				t.Errorf("%s: id %s came back as %s", mode, id, a.id)
			}
		}
		leaks()
		first := map[string]bool{}
		srv.mu.Lock()
		for _, a := range srv.attempts {
			first[string(a.id)] = true
		}
		srv.mu.Unlock()
		for _, id := range ids {
			if !first[id] {
				t.Errorf("%s: no attempt carried id %s byte for byte", mode, id)
			}
		}
		for i, out := range outs {
			if n := out.replyCount(); n != 1 {
				t.Errorf("%s: request %s: %d replies", mode, ids[i], n)
			}
		}
		c.Close()
	}
	leaks()
}

// TestReverseServerReplyOddities: a nil final reply (the server's
// connection cancelled the request) is one error; a second final reply is
// dropped, the first counts.
func TestReverseServerReplyOddities(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverPlain)
	c, _ := newRevConn(t, srv, time.Minute)
	revInit(t, c)

	out := &revStream{}
	revHandle(c, revCall("1", 1), out)
	srv.attempt(t, 1).out.Reply(nil)
	revWantError(t, out.reply(t), "1", protocol.CodeServerError, "cancelled")

	twice := &revStream{}
	revHandle(c, revCall("2", 2), twice)
	a := srv.attempt(t, 2)
	a.reply(`{"first":true}`)
	a.reply(`{"second":true}`)
	if got := twice.reply(t); !strings.Contains(got, `"first"`) {
		t.Errorf("got %s", got)
	}

	// A final "answer" that is no response (a connection delivering
	// garbage, a request, a batch): one error with the client's id, never
	// the message as it came (which the client could not match).
	for i, bad := range []string{`not json`, `{"jsonrpc":"2.0","result":{}}`, `{"jsonrpc":"2.0","id":5,"method":"x"}`, `[{"jsonrpc":"2.0","id":5,"result":{}}]`} {
		garbage := &revStream{}
		id := fmt.Sprintf(`"g%d"`, i)
		revHandle(c, revCall(id, 0), garbage)
		srv.attempt(t, 3+i).out.Reply([]byte(bad))
		revWantError(t, garbage.reply(t), id, protocol.CodeInternalError, "not a JSON-RPC response")
	}

	// input_required then a final answer on the same attempt: the first
	// counts, the client is asked.
	asked := &revStream{}
	revHandle(c, revCall("3", 3), asked)
	a = srv.attempt(t, 7)
	a.inputRequired(`{"r":{"method":"roots/list"}}`, "")
	a.reply(`{"sneaky":true}`)
	ask := asked.waitAsks(t, 1)[0]
	revHandle(c, revResponse(ask.Bytes(ask.ID), `{"roots":[]}`), nil)
	srv.attempt(t, 8).reply(`{"final":true}`)
	if got := asked.reply(t); !strings.Contains(got, `"final"`) {
		t.Errorf("got %s", got)
	}
	leaks()
	for i, s := range []*revStream{out, twice, asked} {
		if n := s.replyCount(); n != 1 {
			t.Errorf("request %d: %d replies", i+1, n)
		}
	}
	c.Close()
	leaks()
}

// TestReverseProgressToItsRequest: the progress of an attempt (the first
// or a retry) reaches its request's stream only, with the client's token;
// nothing follows the final answer.
func TestReverseProgressToItsRequest(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverPlain)
	c, general := newRevConn(t, srv, time.Minute)
	revInit(t, c)
	s1, s2 := &revStream{}, &revStream{}
	revHandle(c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"p1"}}}`, s1)
	a1 := srv.attempt(t, 1)
	revHandle(c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":7}}}`, s2)
	a2 := srv.attempt(t, 2)
	if got := string(a1.meta(t)["progressToken"]); got != `"p1"` {
		t.Errorf("first attempt's progressToken %s", got)
	}
	if got := string(a2.meta(t)["progressToken"]); got != `7` {
		t.Errorf("second attempt's progressToken %s", got)
	}
	progress := func(token string, n int) []byte {
		return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`, token, n))
	}
	a1.out.Send(progress(`"p1"`, 1))
	a2.out.Send(progress(`7`, 1))
	a1.out.Send(progress(`"p1"`, 2))
	a1.inputRequired(`{"r":{"method":"roots/list"}}`, `"s"`)
	ask := s1.waitAsks(t, 1)[0]
	revHandle(c, revResponse(ask.Bytes(ask.ID), `{"roots":[]}`), nil)
	retry := srv.attempt(t, 3)
	if got := string(retry.meta(t)["progressToken"]); got != `"p1"` {
		t.Errorf("retry's progressToken %s", got)
	}
	retry.out.Send(progress(`"p1"`, 3))
	retry.reply(`{"done":1}`)
	s1.reply(t)
	retry.out.Send(progress(`"p1"`, 4)) // after the final answer
	a1.out.Send(progress(`"p1"`, 5))    // a finished attempt's
	a2.reply(`{"done":2}`)
	s2.reply(t)
	leaks()
	sends1, _ := s1.got()
	sends2, _ := s2.got()
	want1 := []string{string(progress(`"p1"`, 1)), string(progress(`"p1"`, 2)), string(ask.Raw), string(progress(`"p1"`, 3))}
	if !slices.Equal(sends1, want1) {
		t.Errorf("stream 1 got\n%q\nwant\n%q", sends1, want1)
	}
	if want2 := []string{string(progress(`7`, 1))}; !slices.Equal(sends2, want2) {
		t.Errorf("stream 2 got %q, want %q", sends2, want2)
	}
	if sends, replies := general.got(); len(sends)+len(replies) != 0 {
		t.Errorf("the general stream got %q %q", sends, replies)
	}
	c.Close()
	leaks()
}

// TestReverseLocalMethods: ping, logging/setLevel and tasks/* are answered
// by the gateway; the level reaches the requests that follow.
func TestReverseLocalMethods(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverPlain)
	srv.respond = func(a *revAttempt) { a.reply(`{}`) }
	c, _ := newRevConn(t, srv, time.Minute)
	revInit(t, c)
	for raw, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1.0,"method":"ping"}`:                                      `{"jsonrpc":"2.0","id":1.0,"result":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`: `{"jsonrpc":"2.0","id":2,"result":{}}`,
	} {
		out := &revStream{}
		revHandle(c, raw, out)
		if _, replies := out.got(); len(replies) != 1 || replies[0] != want {
			t.Errorf("%s: %q", raw, replies)
		}
	}
	for raw, code := range map[string]int{
		`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":3}}`: protocol.CodeInvalidParams,
		`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"t"}}`:     protocol.CodeMethodNotFound,
	} {
		out := &revStream{}
		revHandle(c, raw, out)
		_, replies := out.got()
		if len(replies) != 1 {
			t.Fatalf("%s: %q", raw, replies)
		}
		revWantError(t, replies[0], "3", code, "")
	}
	if n, _ := srv.count(); n != 0 {
		t.Errorf("%d requests went up", n)
	}
	out := &revStream{}
	revHandle(c, revCall("9", 9), out)
	out.reply(t)
	if got := string(srv.attempt(t, 1).meta(t)["io.modelcontextprotocol/logLevel"]); got != `"debug"` {
		t.Errorf("logLevel in the next request: %s", got)
	}
	c.Close()
	leaks()
}

// TestReverseSameIDConcurrent: many requests with one id on one session,
// on streams of their own and on one stream, some through an input round,
// each answered once with the id and its own result.
func TestReverseSameIDConcurrent(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverPlain)
	srv.respond = func(a *revAttempt) {
		p := a.params(t)
		var args struct{ N int }
		_ = json.Unmarshal(p["arguments"], &args)
		if args.N%2 == 0 && p["requestState"] == nil {
			a.inputRequired(`{"r":{"method":"roots/list"}}`, fmt.Sprintf(`"n%d"`, args.N))
			return
		}
		a.reply(fmt.Sprintf(`{"n":%d,"state":%s,"in":%s}`, args.N, orNull(p["requestState"]), orNull(p["inputResponses"])))
	}
	c, _ := newRevConn(t, srv, time.Minute)
	revInit(t, c)
	answer := func(id []byte, _ string) []byte {
		return jsonrpc.Response(id, []byte(`{"roots":[{"uri":"file:///`+strings.Trim(string(id), `"`)+`"}]}`))
	}
	const n = 64
	shared := &revStream{conn: c, answer: answer}
	own := make([]*revStream, n)
	var wg sync.WaitGroup
	for i := range n {
		own[i] = &revStream{conn: c, answer: answer}
		wg.Add(2)
		go func() { defer wg.Done(); revHandle(c, revCall("1", i), own[i]) }()
		go func() { defer wg.Done(); revHandle(c, revCall("1", n+i), shared) }()
	}
	wg.Wait()
	check := func(raw string, want int) {
		t.Helper()
		a := revParse(t, raw)
		var r struct {
			N     int
			State *string
			In    map[string]struct {
				Roots []struct{ URI string }
			}
		}
		if string(a.id) != "1" || json.Unmarshal(a.result, &r) != nil || (want >= 0 && r.N != want) {
			t.Fatalf("reply %s, want n=%d", raw, want)
		}
		if r.N%2 == 0 {
			if r.State == nil || *r.State != fmt.Sprint("n", r.N) || len(r.In["r"].Roots) != 1 {
				t.Fatalf("n=%d: retry did not carry its own state and answer: %s", r.N, raw)
			}
		}
	}
	for i := range n {
		check(own[i].reply(t), i)
	}
	testkit.WaitFor(t, "the shared stream's replies", func() bool { return shared.replyCount() == n })
	leaks()
	_, replies := shared.got()
	seen := map[int]bool{}
	for _, raw := range replies {
		check(raw, -1)
		var r struct{ N int }
		_ = json.Unmarshal(revParse(t, raw).result, &r)
		seen[r.N] = true
	}
	if len(seen) != n {
		t.Errorf("the shared stream got %d distinct answers of %d", len(seen), n)
	}
	for i := range n {
		if k := own[i].replyCount(); k != 1 {
			t.Errorf("request %d: %d replies", i, k)
		}
		// Each stream got its own asks only (odd n: none).
		if asks := own[i].asks(); len(asks) != 1-i%2 {
			t.Errorf("request %d: %d asks", i, len(asks))
		}
	}
	c.mu.Lock()
	waiting, calls := len(c.waiting), c.calls.Len()
	c.mu.Unlock()
	if waiting != 0 || calls != 0 {
		t.Errorf("left: %d waiting, %d calls", waiting, calls)
	}
	c.Close()
	leaks()
}

func orNull(v json.RawMessage) string {
	if v == nil {
		return "null"
	}
	return string(v)
}

// TestReverseEndRacesFinalReply: the server's final answer racing the
// request's end (its client leaving, cancelling, the session closing, the
// timeout): never two answers; exactly one where the request is owed one.
func TestReverseEndRacesFinalReply(t *testing.T) {
	for _, end := range []string{"abandon", "cancel", "close", "timeout"} {
		t.Run(end, func(t *testing.T) {
			leaks := revLeaks(t)
			for round := 0; round < 100; round++ {
				srv := newRevServer(revDiscoverPlain)
				timeout := time.Minute
				if end == "timeout" {
					timeout = time.Duration(round%5) * 100 * time.Microsecond
					if timeout == 0 {
						timeout = time.Nanosecond
					}
					srv.respond = func(a *revAttempt) { a.reply(`{"ok":true}`) }
				}
				c, _ := newRevConn(t, srv, timeout) // no initialize: requests need none
				out := &revStream{}
				revHandle(c, revCall(`"r"`, round), out)
				if end != "timeout" {
					a := srv.attempt(t, 1)
					var wg sync.WaitGroup
					wg.Add(2)
					go func() { defer wg.Done(); a.reply(`{"ok":true}`) }()
					go func() {
						defer wg.Done()
						switch end {
						case "abandon":
							c.Abandon(out)
						case "cancel":
							revHandle(c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r"}}`, nil)
						case "close":
							c.Close()
						}
					}()
					wg.Wait()
				}
				if end != "abandon" {
					testkit.WaitFor(t, "an answer", func() bool { return out.replyCount() > 0 })
				}
				c.Close()
				leaks()
				_, replies := out.got()
				switch {
				case len(replies) > 1:
					t.Fatalf("round %d: %d answers: %q", round, len(replies), replies)
				case end == "abandon" && len(replies) == 1 && !strings.Contains(replies[0], `"ok"`):
					t.Fatalf("round %d: an abandoned request got %q", round, replies[0])
				case end == "cancel" && replies[0] != "" && !strings.Contains(replies[0], `"ok"`):
					t.Fatalf("round %d: a cancelled request got %q", round, replies[0])
				case end == "close" || end == "timeout":
					if a := revParse(t, replies[0]); string(a.id) != `"r"` || (a.result == nil && a.code != protocol.CodeServerError) {
						t.Fatalf("round %d: %q", round, replies[0])
					}
				}
			}
		})
	}
}

// TestReverseSessionsDoNotCross: sessions on one server, their requests
// asking their clients at once: each client gets its own session's asks
// only, and each retry carries its own client's answer.
func TestReverseSessionsDoNotCross(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverPlain)
	srv.respond = func(a *revAttempt) {
		p := a.params(t)
		if p["requestState"] == nil {
			var args struct{ N int }
			_ = json.Unmarshal(p["arguments"], &args)
			a.inputRequired(`{"who":{"method":"elicitation/create","params":{"message":"who are you?"}}}`, fmt.Sprintf(`"%d"`, args.N))
			return
		}
		a.reply(fmt.Sprintf(`{"state":%s,"in":%s}`, p["requestState"], p["inputResponses"]))
	}
	const sessions, calls = 16, 8
	conns := make([]*reverseConn, sessions)
	for i := range conns {
		conns[i], _ = newRevConn(t, srv, time.Minute)
		revInit(t, conns[i])
	}
	outs := make([][]*revStream, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		outs[i] = make([]*revStream, calls)
		for j := range calls {
			who := fmt.Sprintf("s%d", i)
			out := &revStream{conn: conns[i], answer: func(id []byte, _ string) []byte {
				return jsonrpc.Response(id, []byte(`{"action":"accept","content":{"who":"`+who+`"}}`))
			}}
			outs[i][j] = out
			wg.Add(1)
			go func() { defer wg.Done(); revHandle(conns[i], revCall("1", i*calls+j), out) }()
		}
	}
	wg.Wait()
	for i := range sessions {
		for j := range calls {
			a := revParse(t, outs[i][j].reply(t))
			want := fmt.Sprintf(`{"state":"%d","in":{"who":{"action":"accept","content":{"who":"s%d"}}}}`, i*calls+j, i)
			if string(a.id) != "1" || string(a.result) != want {
				t.Fatalf("session %d call %d: %s, want result %s", i, j, outs[i][j].replies, want)
			}
		}
	}
	for _, c := range conns {
		c.Close()
	}
	leaks()
	for i := range sessions {
		for j := range calls {
			if sends, replies := outs[i][j].got(); len(sends) != 1 || len(replies) != 1 {
				t.Errorf("session %d call %d: %d messages, %d replies", i, j, len(sends), len(replies))
			}
		}
	}
}
