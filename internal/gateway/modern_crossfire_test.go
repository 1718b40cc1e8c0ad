package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/mcptest"
	"github.com/mcpgate/mcpgate/internal/sse"
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

// crossCall is the id and token of client c's call i.
func crossCall(c, i int) (id, token string) {
	return crossIDs[(c+i)%len(crossIDs)], crossTokens[(c*3+i)%len(crossTokens)]
}

// wantProgress is how many progress notifications echo sends.
func wantProgress(token string) int {
	if token == "" {
		return 0
	}
	return 3
}

// crossMeta is the _meta of a 2026-07-28 request, with a progress token
// unless token is "".
func crossMeta(token string) string {
	m := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	if token != "" {
		m += `,"progressToken":` + token
	}
	return m + `}`
}

// crossPost POSTs a 2026-07-28 request (name: the tool, for Mcp-Name).
func crossPost(ctx context.Context, g *testGateway, method, name, body string) (*http.Response, error) {
	req := modernRequest(ctx, g, "s", method, body)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	return g.http.Do(req)
}

// crossToolBody is a 2026-07-28 tools/call.
func crossToolBody(id, tool string, args any, token string) string {
	a, _ := json.Marshal(args)
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + string(a) + `,` + crossMeta(token) + `}}`
}

// readMessages returns the JSON-RPC messages of a reply: its JSON body, or
// its SSE events' data in order (the priming event, without data,
// skipped). each, if set, sees every message as it arrives; it stops the
// reading by returning false.
func readMessages(resp *http.Response, each func(json.RawMessage) bool) ([]json.RawMessage, error) {
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil, nil
		}
		if each != nil {
			each(b)
		}
		return []json.RawMessage{b}, nil
	}
	var msgs []json.RawMessage
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		if len(ev.Data) == 0 {
			continue
		}
		m := json.RawMessage(bytes.Clone(ev.Data))
		msgs = append(msgs, m)
		if each != nil && !each(m) {
			return msgs, nil
		}
	}
}

// crossMsg is the parts of a message the crossfire checks; raw values are
// kept as their bytes.
type crossMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Progress      json.RawMessage `json:"progress"`
		URI           string          `json:"uri"`
		Notifications json.RawMessage `json:"notifications"`
		Meta          struct {
			Sub json.RawMessage `json:"io.modelcontextprotocol/subscriptionId"`
		} `json:"_meta"`
	} `json:"params"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Meta struct {
			Sub json.RawMessage `json:"io.modelcontextprotocol/subscriptionId"`
		} `json:"_meta"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

func (m *crossMsg) text() string {
	if m.Result == nil || len(m.Result.Content) == 0 {
		return ""
	}
	return m.Result.Content[0].Text
}

// crossMarker finds the payload markers of the crossfire's calls.
var crossMarker = regexp.MustCompile(`[ml]c\d+/\d+`)

// checkCall checks the messages one tools/call got: progress tokened with
// its own token only (progress 1..wantProgress in order, when it asked for
// progress), then exactly one response, last, with its own id byte for
// byte and the text want, and no marker but mine in any of it. It returns
// whether another client's payload (or progress) was seen, and what is
// wrong.
func checkCall(msgs []json.RawMessage, id, token, want, mine string, wantProgress int) (crossed bool, err error) {
	progress, responses := 0, 0
	for i, raw := range msgs {
		for _, mk := range crossMarker.FindAll(raw, -1) {
			if string(mk) != mine {
				return true, fmt.Errorf("%s got %s's payload: %s", mine, mk, raw)
			}
		}
		var m crossMsg
		if err := json.Unmarshal(raw, &m); err != nil {
			return false, fmt.Errorf("%s: message %d %q: %v", mine, i, raw, err)
		}
		switch {
		case m.Method == "notifications/progress":
			progress++
			if token == "" || !bytes.Equal(m.Params.ProgressToken, []byte(token)) {
				return true, fmt.Errorf("%s (token %s) got progress for token %s: %s", mine, token, m.Params.ProgressToken, raw)
			}
			if string(m.Params.Progress) != fmt.Sprint(progress) {
				return false, fmt.Errorf("%s: progress %s, want %d: %s", mine, m.Params.Progress, progress, raw)
			}
		case m.Method != "":
			return true, fmt.Errorf("%s got a notification not for it: %s", mine, raw)
		case i != len(msgs)-1:
			return false, fmt.Errorf("%s: a response before the end (message %d of %d): %s", mine, i+1, len(msgs), raw)
		case !bytes.Equal(m.ID, []byte(id)):
			return true, fmt.Errorf("%s (id %s) got a response with id %s: %s", mine, id, m.ID, raw)
		case m.Error != nil || m.text() != want:
			return true, fmt.Errorf("%s: response %s, want the text %q", mine, raw, want)
		default:
			responses++
		}
	}
	if responses != 1 {
		return false, fmt.Errorf("%s: no response (%d messages: %q)", mine, len(msgs), msgs)
	}
	if progress != wantProgress {
		return false, fmt.Errorf("%s: %d progress notifications, want %d: %q", mine, progress, wantProgress, msgs)
	}
	return false, nil
}

// crossTally gathers the failures of concurrent clients.
type crossTally struct {
	crossed atomic.Int64
	mu      sync.Mutex
	errs    []error
}

func (x *crossTally) add(crossed bool, err error) {
	if crossed {
		x.crossed.Add(1)
	}
	if err != nil {
		x.mu.Lock()
		x.errs = append(x.errs, err)
		x.mu.Unlock()
	}
}

func (x *crossTally) report(t *testing.T) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, err := range x.errs {
		if i == 20 {
			t.Errorf("... and %d more", len(x.errs)-i)
			break
		}
		t.Error(err)
	}
	if n := x.crossed.Load(); n != 0 {
		t.Errorf("crossed = %d, want 0", n)
	}
}

// modernEcho is one 2026-07-28 echo call of client c (its call i) with
// progress, checked.
func modernEcho(ctx context.Context, g *testGateway, x *crossTally, c, i int) {
	id, token := crossCall(c, i)
	mine := fmt.Sprintf("mc%d/%d", c, i)
	resp, err := crossPost(ctx, g, "tools/call", "echo", crossToolBody(id, "echo", map[string]string{"message": mine}, token))
	if err != nil {
		x.add(false, fmt.Errorf("%s: %v", mine, err))
		return
	}
	msgs, err := readMessages(resp, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		x.add(false, fmt.Errorf("%s: status %d, %v, %q", mine, resp.StatusCode, err, msgs))
		return
	}
	x.add(checkCall(msgs, id, token, mine, mine, wantProgress(token)))
}

// legacyCrossClient is a session of 2025-11-25 on server s that calls echo
// calls times (ids and tokens as the modern clients have them), checking
// each reply, and deletes its session.
func legacyCrossClient(ctx context.Context, g *testGateway, x *crossTally, c, calls int) {
	url := g.URL + "/servers/s/mcp"
	post := func(session, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		return g.http.Do(req)
	}
	resp, err := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"crossfire","version":"1"}}}`)
	if err != nil {
		x.add(false, fmt.Errorf("legacy client %d: initialize: %v", c, err))
		return
	}
	session := resp.Header.Get("Mcp-Session-Id")
	msgs, err := readMessages(resp, nil)
	if err != nil || resp.StatusCode != http.StatusOK || session == "" || len(msgs) != 1 {
		x.add(false, fmt.Errorf("legacy client %d: initialize: status %d, session %q, %v, %q", c, resp.StatusCode, session, err, msgs))
		return
	}
	if resp, err := post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || resp.StatusCode != http.StatusAccepted {
		x.add(false, fmt.Errorf("legacy client %d: initialized: %v", c, err))
		return
	} else {
		resp.Body.Close()
	}
	for i := range calls {
		id, token := crossCall(c, i)
		mine := fmt.Sprintf("lc%d/%d", c, i)
		meta := ""
		if token != "" {
			meta = `{"progressToken":` + token + `}`
		}
		resp, err := post(session, callBody(id, "echo", map[string]string{"message": mine}, meta))
		if err != nil {
			x.add(false, fmt.Errorf("%s: %v", mine, err))
			return
		}
		msgs, err := readMessages(resp, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			x.add(false, fmt.Errorf("%s: status %d, %v, %q", mine, resp.StatusCode, err, msgs))
			return
		}
		x.add(checkCall(msgs, id, token, mine, mine, wantProgress(token)))
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if resp, err := g.http.Do(req); err != nil {
		x.add(false, fmt.Errorf("legacy client %d: DELETE: %v", c, err))
	} else {
		resp.Body.Close()
	}
}

// crossFilter is a listen's filter as the test reads it.
type crossFilter struct {
	Tools     bool     `json:"toolsListChanged,omitempty"`
	Prompts   bool     `json:"promptsListChanged,omitempty"`
	Resources bool     `json:"resourcesListChanged,omitempty"`
	URIs      []string `json:"resourceSubscriptions,omitempty"`
}

func (f crossFilter) equal(g crossFilter) bool {
	return f.Tools == g.Tools && f.Prompts == g.Prompts && f.Resources == g.Resources && slices.Equal(f.URIs, g.URIs)
}

// wants is the revision's rule: a listen gets a list_changed of the kinds
// it asked for, and resources/updated for a URI it subscribed to or one
// under it.
func (f crossFilter) wants(method, uri string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.Tools
	case "notifications/prompts/list_changed":
		return f.Prompts
	case "notifications/resources/list_changed":
		return f.Resources
	case "notifications/resources/updated":
		return slices.ContainsFunc(f.URIs, func(s string) bool {
			return uri == s || strings.HasPrefix(uri, strings.TrimSuffix(s, "/")+"/")
		})
	}
	return false
}

// crossEvent is a tool call that makes the server notify its listens.
type crossEvent struct {
	tool, arg, value string // e.g. list_changed kind tools, touch uri mem://a
}

// note is the notification the event makes, and its URI.
func (e crossEvent) note() (method, uri string) {
	if e.tool == "touch" {
		return "notifications/resources/updated", e.value
	}
	return "notifications/" + e.value + "/list_changed", ""
}

// crossListen is one client's subscriptions/listen: what it got so far.
type crossListen struct {
	name, id string
	want     crossFilter
	cancel   context.CancelFunc

	mu      sync.Mutex
	msgs    []json.RawMessage
	ended   bool  // the stream ended
	err     error // why, if not with the end of the body
	changed chan struct{}
}

// openListen starts a listen with raw id and filter (JSON) and reads its
// stream until it ends or the listen is cancelled.
func openListen(ctx context.Context, g *testGateway, name, id, filter string) *crossListen {
	ctx, cancel := context.WithCancel(ctx)
	l := &crossListen{name: name, id: id, cancel: cancel, changed: make(chan struct{}, 1)}
	if err := json.Unmarshal([]byte(filter), &l.want); err != nil {
		panic(err)
	}
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{"notifications":` + filter + `,` + crossMeta("") + `}}`
	go func() {
		var err error
		defer func() {
			l.mu.Lock()
			l.ended, l.err = true, err
			l.mu.Unlock()
			l.signal()
		}()
		var resp *http.Response
		resp, err = crossPost(ctx, g, "subscriptions/listen", "", body)
		if err != nil {
			return
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			err = fmt.Errorf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			return
		}
		_, err = readMessages(resp, func(m json.RawMessage) bool {
			l.mu.Lock()
			l.msgs = append(l.msgs, m)
			l.mu.Unlock()
			l.signal()
			return true
		})
	}()
	return l
}

func (l *crossListen) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// waitUntil waits until cond holds for what the listen got, the stream
// ended, or ctx is done; it reports whether cond held.
func (l *crossListen) waitUntil(ctx context.Context, cond func(msgs []json.RawMessage, ended bool) bool) bool {
	for {
		l.mu.Lock()
		ok, ended := cond(l.msgs, l.ended), l.ended
		l.mu.Unlock()
		if ok {
			return true
		}
		if ended {
			return false
		}
		select {
		case <-l.changed:
		case <-ctx.Done():
			return false
		}
	}
}

func (l *crossListen) snapshot() ([]json.RawMessage, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs), l.ended, l.err
}

// check checks everything listen l got: its acknowledgement first (its
// own id, its own filter), then only notifications its filter selects,
// tagged with its own id; with final, then the server's end of the listen
// as a final result with its own id in the id and the tag. counts, if not
// nil, are the notifications it must have got by method (resources/updated
// by URI: "notifications/resources/updated mem://a").
func (l *crossListen) check(final bool, counts map[string]int) (crossed bool, err error) {
	msgs, _, rerr := l.snapshot()
	if final && rerr != nil {
		return false, fmt.Errorf("%s (id %s): stream error %v after %q", l.name, l.id, rerr, msgs)
	}
	if len(msgs) == 0 {
		return false, fmt.Errorf("%s (id %s): no acknowledgement (%v)", l.name, l.id, rerr)
	}
	got := map[string]int{}
	for i, raw := range msgs {
		if crossMarker.Match(raw) {
			return true, fmt.Errorf("%s (id %s) got a call's payload: %s", l.name, l.id, raw)
		}
		var m crossMsg
		if err := json.Unmarshal(raw, &m); err != nil {
			return false, fmt.Errorf("%s: message %d %q: %v", l.name, i, raw, err)
		}
		last := i == len(msgs)-1
		switch {
		case i == 0:
			var agreed crossFilter
			if m.Method != "notifications/subscriptions/acknowledged" || !bytes.Equal(m.Params.Meta.Sub, []byte(l.id)) ||
				json.Unmarshal(m.Params.Notifications, &agreed) != nil || !agreed.equal(l.want) {
				return !bytes.Equal(m.Params.Meta.Sub, []byte(l.id)), fmt.Errorf("%s (id %s, filter %+v): first message %s, want its acknowledgement", l.name, l.id, l.want, raw)
			}
		case final && last:
			if m.Method != "" || !bytes.Equal(m.ID, []byte(l.id)) || m.Result == nil || !bytes.Equal(m.Result.Meta.Sub, []byte(l.id)) {
				return !bytes.Equal(m.ID, []byte(l.id)), fmt.Errorf("%s (id %s): last message %s, want the listen's final result with its id", l.name, l.id, raw)
			}
		case m.Method == "notifications/subscriptions/acknowledged":
			return false, fmt.Errorf("%s (id %s): acknowledged again (message %d): %s", l.name, l.id, i, raw)
		case m.Method == "":
			return !bytes.Equal(m.ID, []byte(l.id)), fmt.Errorf("%s (id %s): a response as message %d of %d: %s", l.name, l.id, i+1, len(msgs), raw)
		default:
			if !bytes.Equal(m.Params.Meta.Sub, []byte(l.id)) {
				return true, fmt.Errorf("%s (id %s): message %d tagged %s: %s", l.name, l.id, i, m.Params.Meta.Sub, raw)
			}
			if !l.want.wants(m.Method, m.Params.URI) {
				return true, fmt.Errorf("%s (id %s, filter %+v): message %d not selected by its filter: %s", l.name, l.id, l.want, i, raw)
			}
			key := m.Method
			if m.Params.URI != "" {
				key += " " + m.Params.URI
			}
			got[key]++
		}
	}
	if counts != nil {
		for k, n := range counts {
			if got[k] != n {
				return false, fmt.Errorf("%s (id %s, filter %+v): %d of %s, want %d (all: %v)", l.name, l.id, l.want, got[k], k, n, got)
			}
		}
		for k, n := range got {
			if counts[k] == 0 {
				return false, fmt.Errorf("%s (id %s): %d of %s, want none", l.name, l.id, n, k)
			}
		}
	}
	return false, nil
}

// acked reports whether msgs hold the acknowledgement.
func acked(msgs []json.RawMessage, _ bool) bool { return len(msgs) > 0 }

// waitGateway waits (bounded) until nothing is pending upstream and no
// session is recorded. It closes the test client's idle connections: a
// connection the client dialed but never sent a request on (one dialed
// for a request that found another connection first, or that was left)
// would hold the gateway's shutdown for 5 s (http.Server.Shutdown waits
// that long for a new connection's first request).
func waitGateway(t *testing.T, g *testGateway) {
	t.Helper()
	defer g.http.Transport.(*http.Transport).CloseIdleConnections()
	deadline := time.Now().Add(20 * time.Second)
	for g.pending("s") != 0 || g.gw.Handler.Sessions() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the crossfire: %d requests pending upstream, %d sessions recorded", g.pending("s"), g.gw.Handler.Sessions())
		}
		time.Sleep(5 * time.Millisecond)
	}
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
	g := startGateway(t, newConfig(fakeServer("s", mcptest.FakeOptions{Modern: true})))
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
	g := startGateway(t, newConfig(fakeServer("s", mcptest.FakeOptions{Modern: true})))
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
