package aggregate

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attacks on what the endpoint routes: replies, progress and server
// requests of many sessions over shared members with colliding ids and
// tokens, forged answers to server requests, crafted names and cursors.

// TestFaultConcurrentSessionsNoCrossing: 40 sessions x 20 calls at once
// over two shared members, every session using the same ids (numbers,
// strings, a 25-digit number) and the same progress tokens; each reply
// carries its own id byte for byte and its own text, each stream only its
// own progress with its own token. crossed = 0.
func TestFaultConcurrentSessionsNoCrossing(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a, b)
	const sessions, calls = 40, 20
	clients := make([]*client, sessions)
	for i := range clients {
		clients[i] = connect(t, e, `{}`)
	}
	var crossed, answered atomic.Int64
	var wg sync.WaitGroup
	for s, cl := range clients {
		for j := range calls {
			wg.Go(func() {
				forms := []string{strconv.Itoa(j), strconv.Quote(strconv.Itoa(j)), "1" + strings.Repeat("0", 22) + strconv.Itoa(j)}
				id, token := forms[j%3], forms[(j+1)%3]
				member := "a"
				if j%2 == 1 {
					member = "b"
				}
				want := fmt.Sprintf("s%d-c%d-%s", s, j, member)
				out := newStream()
				raw := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s__echo","arguments":{"message":%q},"_meta":{"progressToken":%s}}}`, id, member, want, token)
				cl.sendTo(raw, out)
				var r []byte
				select {
				case r = <-out.replied:
				case <-time.After(wait):
					t.Errorf("session %d call %d: no reply", s, j)
					crossed.Add(1)
					return
				}
				answered.Add(1)
				if !strings.HasPrefix(string(r), `{"jsonrpc":"2.0","id":`+id+`,`) || text(t, r) != want {
					t.Errorf("session %d call %d (id %s): reply %s, want its own id and text %q", s, j, id, r, want)
					crossed.Add(1)
				}
				out.mu.Lock()
				sends := slices.Clone(out.sends)
				out.mu.Unlock()
				if len(sends) != 3 {
					t.Errorf("session %d call %d: %d progress notifications, want 3: %q", s, j, len(sends), sends)
					crossed.Add(1)
				}
				for _, m := range sends {
					if !strings.Contains(string(m), `"progressToken":`+token+`,`) && !strings.Contains(string(m), `"progressToken":`+token+`}`) {
						t.Errorf("session %d call %d: %s on its stream, want progress with token %s", s, j, m, token)
						crossed.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if n := crossed.Load(); n != 0 || answered.Load() != sessions*calls {
		t.Errorf("crossed %d, answered %d of %d", n, answered.Load(), sessions*calls)
	}
	for s, cl := range clients {
		if n := cl.general.countSent("progress"); n != 0 {
			t.Errorf("session %d: %d progress notifications on its general stream", s, n)
		}
	}
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
}

// serverAsk is a server request as the client got it.
type serverAsk struct {
	id, prompt string
}

func readAsk(t *testing.T, s *stream) serverAsk {
	t.Helper()
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Messages []struct {
				Content struct{ Text string } `json:"content"`
			} `json:"messages"`
		} `json:"params"`
	}
	raw := s.next(t)
	if err := json.Unmarshal(raw, &req); err != nil || req.Method != "sampling/createMessage" || len(req.Params.Messages) != 1 {
		t.Fatalf("server request %s (%v)", raw, err)
	}
	return serverAsk{string(req.ID), req.Params.Messages[0].Content.Text}
}

// answerTo is the client's answer to a sampling request with id.
func answerTo(id, text string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"role":"assistant","content":{"type":"text","text":` + strconv.Quote(text) + `},"model":"m"}}`
}

// TestFaultServerRequestsForgedAnswers: two sessions, each with a sampling
// request of each member open at once (the members' own ids collide);
// the client uses the endpoint's ids of those requests as ids of its own
// requests; answers forged for another session's request, for another
// member, out of range or malformed reach nobody; each real answer reaches
// the member and the call that asked, and nothing reaches another session.
func TestFaultServerRequestsForgedAnswers(t *testing.T) {
	// A process per session: a shared process asks only while exactly
	// one session has a request written to it, so four requests open at
	// once need four processes, each numbering its own requests alike.
	isolated := func(s *config.Server) { s.Isolation = config.IsolationSession }
	a := fakeMemberWith(t, "a", testkit.FakeOptions{}, isolated)
	b := fakeMemberWith(t, "b", testkit.FakeOptions{}, isolated)
	e := newEndpoint(t, Options{}, a, b)
	s1, s2 := connect(t, e, `{"sampling":{}}`), connect(t, e, `{"sampling":{}}`)
	s1.tools()
	s2.tools()

	type open struct {
		cl     *client
		out    *stream
		ask    serverAsk
		answer string
	}
	var asks []*open
	for n, cl := range []*client{s1, s2} {
		for id, member := range []string{"a", "b"} {
			prompt := fmt.Sprintf("s%d%s", n+1, member)
			out := cl.send(toolCall(strconv.Itoa(id+1), member+"__sample", `{"prompt":"`+prompt+`"}`))
			ask := readAsk(t, out)
			if ask.prompt != prompt {
				t.Fatalf("server request %+v on the stream of %s", ask, prompt)
			}
			asks = append(asks, &open{cl: cl, out: out, ask: ask, answer: "answer to " + prompt})
		}
	}
	// Each session's processes number their requests alike, and the
	// sessions' ids are the same too: only the member index tells a
	// session's two requests apart.
	if asks[0].ask.id == asks[1].ask.id || asks[2].ask.id == asks[3].ask.id {
		t.Fatalf("server request ids %+v: want a session's two distinct", asks)
	}
	_, _, innerA, _ := decodeServerID([]byte(asks[0].ask.id), 2)
	_, _, innerB, _ := decodeServerID([]byte(asks[1].ask.id), 2)
	t.Logf("session 1: a's request %s (its own %s), b's %s (its own %s); session 2: %s, %s",
		asks[0].ask.id, innerA, asks[1].ask.id, innerB, asks[2].ask.id, asks[3].ask.id)

	// The client's own requests under the ids of the server requests.
	for _, o := range asks[:2] {
		r := s1.do(toolCall(o.ask.id, "a__echo", `{"message":"mine"}`))
		if !strings.HasPrefix(string(r), `{"jsonrpc":"2.0","id":`+o.ask.id+`,`) || text(t, r) != "mine" {
			t.Errorf("client request with id %s: %s", o.ask.id, r)
		}
	}

	// Forgeries, each before any real answer: a's request's inner id
	// sent to b (unless that is session 1's own request of b), and ids
	// out of range or malformed.
	var forged []string
	if cross := strconv.Quote("m1:" + string(innerA)); cross != asks[1].ask.id {
		forged = append(forged, cross)
	}
	if cross := strconv.Quote("m0:" + string(innerB)); cross != asks[0].ask.id {
		forged = append(forged, cross)
	}
	forged = append(forged,
		strconv.Quote("m2:"+string(innerA)), strconv.Quote("m-1:"+string(innerA)), strconv.Quote("m00:"+string(innerA)),
		strconv.Quote("m0:"), strconv.Quote("m0:{}"), strconv.Quote("m0:null"), strconv.Quote("m0:[1]"),
		strconv.Quote("m0:"+strconv.Quote(string(innerA))), strconv.Quote("m99999999999999999999:1"),
		strconv.Quote(string(innerA)), string(innerA), `null`, `"\u006d0:`+strings.Trim(string(innerA), `"`)+`x"`,
	)
	for _, id := range forged {
		if m, err := parseMsg(answerTo(id, "forged")); err == nil {
			s1.conn.Handle(t.Context(), &m, nil)
		}
	}
	for _, o := range asks {
		if n := o.out.replyCount(); n != 0 {
			t.Errorf("call %q answered before its server request was: %d replies", o.ask.prompt, n)
		}
	}
	// The real answers, in reverse order.
	for _, o := range slices.Backward(asks) {
		o.cl.handle(answerTo(o.ask.id, o.answer), nil)
	}
	for _, o := range asks {
		if got := text(t, o.out.reply(t)); got != o.answer {
			t.Errorf("call %q: %q, want %q (a forged answer reached it?)", o.ask.prompt, got, o.answer)
		}
	}
	for n, cl := range []*client{s1, s2} {
		if k := cl.general.countSent("sampling/createMessage"); k != 0 {
			t.Errorf("session %d: %d sampling requests on its general stream", n+1, k)
		}
	}
	for _, o := range asks {
		if k := o.out.countSent("sampling/createMessage"); k != 1 {
			t.Errorf("call %q: %d sampling requests on its stream, want its own only", o.ask.prompt, k)
		}
	}

	// A shared member: one process, one numbering for every session.
	// Session 2 answers session 1's request (its id, and every id near
	// it); only session 1's answer reaches the member.
	sh := fakeMember(t, "sh", testkit.FakeOptions{})
	es := newEndpoint(t, Options{}, sh, fakeMember(t, "other", testkit.FakeOptions{}))
	c1, c2 := connect(t, es, `{"sampling":{}}`), connect(t, es, `{"sampling":{}}`)
	c1.tools()
	out := c1.send(toolCall("1", "sh__sample", `{"prompt":"p1"}`))
	ask := readAsk(t, out)
	_, _, inner, ok := decodeServerID([]byte(ask.id), 2)
	n, err := strconv.Atoi(string(inner))
	if !ok || err != nil {
		t.Fatalf("server request id %s", ask.id)
	}
	for k := max(n-5, 0); k <= n+5; k++ {
		for _, id := range []string{strconv.Quote(fmt.Sprintf("m0:%d", k)), strconv.Quote(fmt.Sprintf("m1:%d", k))} {
			c2.handle(answerTo(id, "forged by session 2"), nil)
		}
	}
	c1.handle(answerTo(ask.id, "real"), nil)
	if got := text(t, out.reply(t)); got != "real" {
		t.Errorf("session 1's call: %q, want session 1's answer", got)
	}
	if k := c2.general.countSent("sampling"); k != 0 {
		t.Errorf("session 2 saw %d sampling requests", k)
	}
}

// TestFaultNamesCraftedToCollide: names made to collide after shortening,
// across a separator inside a prefix, and after snake_case, with members
// with and without prefixes: none is listed, each call gets an error
// naming every owner, none reaches a member. Filtered names spelled other
// ways (escapes, duplicate keys, case) are never routed. Two prefixes that
// are the same in snake_case are a config error.
func TestFaultNamesCraftedToCollide(t *testing.T) {
	long := strings.Repeat("x", 80)
	short := (naming{sep: "__", max: 64}).expose("a", long)
	ma := marker(t, "a")
	a := fakeMember(t, "a", testkit.FakeOptions{Marker: ma, Catalog: testkit.CatalogOptions{ExtraTools: []string{long, "b__c", "alone"}}})
	a.Filter.Tools.Deny = []string{"crash"}
	ab := fakeMember(t, "ab", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"c"}}})
	ab.Prefix = "a__b"
	z := fakeMember(t, "z", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{short, "a__b__c", "zeta"}}})
	z.Prefix = ""
	e := newEndpoint(t, Options{}, a, ab, z)
	cl := connect(t, e, `{}`)
	names := cl.tools()
	for _, n := range []string{short, "a__b__c"} {
		if slices.Contains(names, n) {
			t.Errorf("colliding name %q listed: %v", n, names)
		}
	}
	for _, n := range []string{"a__alone", "zeta", "a__b__echo", "a__echo", "echo"} {
		if !slices.Contains(names, n) {
			t.Errorf("%q not listed: %v", n, names)
		}
	}
	for _, tc := range []struct {
		name   string
		owners []string
	}{{short, []string{`\"a\"`, `\"z\"`}}, {"a__b__c", []string{`\"a\"`, `\"ab\"`, `\"z\"`}}} {
		r := string(cl.callTool(1, tc.name, `{"message":"m"}`))
		if !strings.Contains(r, "ambiguous") || strings.Contains(r, ": m") {
			t.Errorf("call of colliding %q: %s, want an ambiguity error", tc.name, r)
		}
		for _, o := range tc.owners {
			if !strings.Contains(r, o) {
				t.Errorf("call of colliding %q: %s, want it to name %s", tc.name, r, o)
			}
		}
	}
	if got := text(t, cl.callTool(2, "a__alone", `{"message":"m"}`)); got != "alone: m" {
		t.Errorf("a__alone: %q", got)
	}

	// A filtered name, however spelled, is never routed: the fake's crash
	// tool would end a's process.
	pids := testkit.Procs(ma)
	for _, raw := range []string{
		toolCall("3", "a__crash", `{}`),
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a__\u0063rash","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a__echo","name":"a__crash","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"a__crash","arguments":{}},"params":{"name":"a__echo"}}`,
		toolCall("7", "A__crash", `{}`),
		toolCall("8", "a__crash ", `{}`),
		toolCall("9", "a___crash", `{}`),
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":{"name":"a__crash"}}}`,
		`{"jsonrpc":"2.0","id":11,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"a__crash"},"argument":{"name":"x","value":""}}}`,
	} {
		m, err := parseMsg(raw)
		if err != nil {
			continue // the front refuses it before any endpoint
		}
		out := newStream()
		cl.conn.Handle(t.Context(), &m, out)
		r := string(out.reply(t))
		if !strings.Contains(r, `"error"`) || !strings.HasPrefix(r, `{"jsonrpc":"2.0","id":`+idOf(t, []byte(raw))+`,`) {
			t.Errorf("%s: %s, want an error with its id", raw, r)
		}
	}
	if got := testkit.Procs(ma); !slices.Equal(got, pids) {
		t.Errorf("a's processes %v, then %v: a filtered tool was called", pids, got)
	}

	// snake_case: x's getA and z2's x__get_a are one name; x's get-b and
	// getB too.
	x := fakeMember(t, "x", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"getA", "get-b", "getB", "getC"}}})
	y := fakeMember(t, "y", testkit.FakeOptions{Catalog: testkit.CatalogOptions{ExtraTools: []string{"x__get_a"}}})
	y.Prefix = ""
	es := newEndpoint(t, Options{SnakeCase: true}, x, y)
	cs := connect(t, es, `{}`)
	snames := cs.tools()
	if slices.Contains(snames, "x__get_a") || slices.Contains(snames, "x__get_b") || !slices.Contains(snames, "x__get_c") {
		t.Errorf("snake_case tools %v: want x__get_a and x__get_b left out, x__get_c listed", snames)
	}
	for _, n := range []string{"x__get_a", "x__get_b"} {
		if r := text(t, cs.callTool(1, n, `{"message":"m"}`)); !strings.Contains(r, "ambiguous") {
			t.Errorf("call of %q: %q, want ambiguous", n, r)
		}
	}
	for _, n := range []string{"x__getC", "x__get-c", "x__getc"} {
		if r := text(t, cs.callTool(2, n, `{"message":"m"}`)); !strings.Contains(r, "unknown tool") {
			t.Errorf("call of %q (not the exposed name): %q, want unknown", n, r)
		}
	}
	if got := text(t, cs.callTool(3, "x__get_c", `{"message":"m"}`)); got != "getC: m" {
		t.Errorf("x__get_c: %q, want getC called by its exact name", got)
	}

	// Two prefixes that are one in snake_case: every name of both would
	// collide. A config error, as two equal prefixes are.
	p1 := Member{Name: "p1", Prefix: "MyServer", Backend: nopBackend{}}
	p2 := Member{Name: "p2", Prefix: "my-server", Backend: nopBackend{}}
	if _, err := New(Options{Name: "e", SnakeCase: true}, []Member{p1, p2}); err == nil || !strings.Contains(err.Error(), `"p1"`) || !strings.Contains(err.Error(), `"p2"`) {
		t.Errorf("New with prefixes MyServer and my-server in snake_case: %v, want an error naming both", err)
	}
	if e, err := New(Options{Name: "e"}, []Member{p1, p2}); err != nil {
		t.Errorf("the same prefixes without snake_case: %v", err)
	} else {
		e.Close()
	}
}

// TestFaultCursorsForgedAndReplayed: with pages of 5, cursors a client
// makes up (bad encodings, the old version, member indexes past the end,
// overflowing or overlong varints, trailing bytes, oversized) get an error
// with the request's id, at once; a cursor replayed after a member's list
// changed, or one with an offset past a member's items, is a position
// still: the page from there as the lists are now, filtered.
func TestFaultCursorsForgedAndReplayed(t *testing.T) {
	paged := testkit.FakeOptions{Catalog: testkit.CatalogOptions{ToolPageSize: 3}}
	a := fakeMember(t, "a", paged)
	b := fakeMember(t, "b", paged)
	b.Filter.Tools.Deny = []string{"log"}
	e := newEndpoint(t, Options{PageSize: 5}, a, b)
	cl := connect(t, e, `{}`)
	names := cl.tools()
	if len(names) != 2*builtinTools-1 || slices.Contains(names, "b__log") {
		t.Fatalf("tools %v", names)
	}
	enc := func(b ...byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	list := func(id, cursor string) []byte {
		return cl.do(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/list","params":{"cursor":%s}}`, id, strconv.Quote(cursor)))
	}
	for n, bad := range []string{
		"", "!!!!", "AgAA=", enc(1, 0, '4'), enc(2), enc(2, 0), enc(2, 2, 0), enc(2, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		enc(2, 0x80, 0), enc(2, 0, 0x80, 0), enc(2, 0, 0, 0), strings.Repeat("A", maxCursorLen+1), enc(append([]byte{2, 0}, strings.Repeat("é", 5000)...)...),
	} {
		id := fmt.Sprintf(`"bad-%d"`, n)
		start := time.Now()
		r := string(list(id, bad))
		if !strings.HasPrefix(r, `{"jsonrpc":"2.0","id":`+id+`,"error"`) || !strings.Contains(r, "-32602") {
			t.Errorf("cursor %.40q: %.200s, want -32602 with the request's id", bad, r)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("cursor %.40q answered after %v", bad, d)
		}
	}
	page := func(r []byte) (names []string, next string) {
		var res struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(r, &res); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		return names, res.NextCursor
	}
	// A position the session never was given (b's tools from its 4th):
	// b's tools from there, filtered, renamed, with the next position.
	got, next := page(cl.result(`{"jsonrpc":"2.0","id":200,"method":"tools/list","params":{"cursor":"` + encodeCursor(1, 4) + `"}}`))
	if !slices.Equal(got, names[builtinTools+4:builtinTools+9]) || next != encodeCursor(1, 9) {
		t.Errorf("page at b's 4th tool: %v next %q, want %v and b's 9th", got, next, names[builtinTools+4:builtinTools+9])
	}
	// An offset past a member's items: the next member's first page.
	got, _ = page(cl.result(`{"jsonrpc":"2.0","id":201,"method":"tools/list","params":{"cursor":"` + encodeCursor(0, 1000) + `"}}`))
	if !slices.Equal(got, names[builtinTools:builtinTools+5]) {
		t.Errorf("page at a's 1000th tool: %v, want b's first five", got)
	}
	// Replayed after b's list changed: b's tools as they are now.
	replay := encodeCursor(1, 3)
	if got := text(t, cl.callTool(202, "b__list_changed", `{"count":3}`)); got != "ok" {
		t.Fatalf("list_changed: %q", got)
	}
	cl.general.waitNotification(t, "notifications/tools/list_changed")
	got, _ = page(cl.result(`{"jsonrpc":"2.0","id":203,"method":"tools/list","params":{"cursor":"` + replay + `"}}`))
	if !slices.Equal(got, names[builtinTools+3:builtinTools+8]) {
		t.Errorf("replayed cursor after list_changed: %v, want %v", got, names[builtinTools+3:builtinTools+8])
	}
	// Concurrent replays while b keeps changing: every one answered once,
	// never a filtered or foreign name.
	var wg sync.WaitGroup
	var bad atomic.Int64
	for n := range 50 {
		wg.Go(func() {
			out := newStream()
			cursor := []string{replay, encodeCursor(1, 4), encodeCursor(0, 6), encodeCursor(1, 0)}[n%4]
			cl.sendTo(fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","method":"tools/list","params":{"cursor":%q}}`, n, cursor), out)
			select {
			case r := <-out.replied:
				if strings.Contains(string(r), `"b__log"`) || strings.Contains(string(r), `"name":"log"`) || !strings.HasPrefix(string(r), fmt.Sprintf(`{"jsonrpc":"2.0","id":"r%d","result"`, n)) {
					t.Errorf("replay %d: %s", n, r)
					bad.Add(1)
				}
			case <-time.After(wait):
				t.Errorf("replay %d: no reply", n)
				bad.Add(1)
			}
		})
		if n%10 == 0 {
			cl.sendTo(toolCall(strconv.Quote(fmt.Sprintf("lc%d", n)), "b__list_changed", `{}`), newStream())
		}
	}
	wg.Wait()
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
}

// TestFaultServerRequestWithdrawn: a member withdraws its server request
// (the call that asked was cancelled by the client): the client hears the
// cancellation under the id it was asked with, and a late answer to it
// reaches nobody, while the member's next request works.
func TestFaultServerRequestWithdrawn(t *testing.T) {
	a := fakeMember(t, "a", testkit.FakeOptions{})
	b := fakeMember(t, "b", testkit.FakeOptions{})
	e := newEndpoint(t, Options{}, a, b)
	cl := connect(t, e, `{"sampling":{}}`)
	cl.tools()
	out := cl.send(toolCall(`"asks"`, "b__sample", `{"prompt":"p"}`))
	ask := readAsk(t, out)
	cl.handle(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"asks"}}`, nil)
	if r := out.reply(t); r != nil {
		t.Errorf("cancelled call answered %s", r)
	}
	// The fake withdraws its request; it comes on the call's stream or
	// the session's, with the id the client got.
	want := `"requestId":` + ask.id
	testkit.WaitFor(t, "the withdrawal", func() bool {
		return out.countSent(want) > 0 || cl.general.countSent(want) > 0
	})
	if n := out.countSent("notifications/cancelled") + cl.general.countSent("notifications/cancelled"); n != 1 {
		t.Errorf("%d cancellations relayed", n)
	}
	cl.handle(answerTo(ask.id, "late"), nil)
	out2 := cl.send(toolCall(`"again"`, "b__sample", `{"prompt":"q"}`))
	ask2 := readAsk(t, out2)
	cl.handle(answerTo(ask2.id, "second"), nil)
	if got := text(t, out2.reply(t)); got != "second" {
		t.Errorf("next call: %q", got)
	}
	testkit.WaitFor(t, "nothing pending", func() bool { return e.Pending() == 0 })
}
