package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// These tests run translate.go's translation processes against the
// testkit fake as a server of the session eras ("protocol": "legacy"): its
// sample tool asks the client for sampling/createMessage and waits, as a
// stateless request parked for input does (front's bridge would answer
// it input_required; here the test holds the server request).

// translated starts a legacy-pinned fake server and returns it with its
// translation pool and marker once its sessions' process is ready (Close
// and the leak check are cleanups).
func translated(t *testing.T, name string) (Server, *translation, string) {
	t.Helper()
	s, marker := newMarked(t, name, testkit.FakeOptions{}, config.ProtocolLegacy)
	sh := s.(*shared)
	// Its own initialize done, Pending counts the translation processes'.
	testkit.WaitFor(t, "the sessions' process", func() bool { return sh.p.m.State().Phase == mux.Ready })
	return s, sh.trans, marker
}

// openTranslated opens a translated stateless connection declaring caps
// and returns it with the recorder of its standalone stream.
func openTranslated(t *testing.T, s Server, caps string) (conn.StatelessConn, *recorder) {
	t.Helper()
	general := newRecorder()
	c, err := s.OpenStateless(context.Background(), general, protocol.StatelessVersion, []byte(caps))
	if err != nil {
		t.Fatalf("OpenStateless: %v", err)
	}
	if passthrough(c) {
		t.Fatal("a legacy-pinned server's request is passed through")
	}
	t.Cleanup(c.Close)
	return c, general
}

// parked is a sample call whose server request the test holds.
type parked struct {
	c   conn.StatelessConn
	out *recorder
	gid string // the gateway id of the server's sampling request
}

// park calls the sample tool on c and waits for the server's sampling
// request to reach c's request stream.
func park(t *testing.T, c conn.StatelessConn, prompt string) *parked {
	t.Helper()
	out := newRecorder()
	msg, err := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"sample","arguments":{"prompt":%q},`+modernMeta+`}}`, prompt, `{"sampling":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	c.Handle(context.Background(), &msg, out)
	var gid string
	out.wait(t, "the sampling request of "+prompt, func(sends, replies []string) bool {
		for _, s := range sends {
			if m, err := jsonrpc.Parse([]byte(s)); err == nil && m.MethodIs("sampling/createMessage") {
				gid = string(m.Bytes(m.ID))
				return true
			}
		}
		if len(replies) > 0 {
			t.Fatalf("%s answered before it asked: %s", prompt, replies[0])
		}
		return false
	})
	return &parked{c: c, out: out, gid: gid}
}

// answer answers p's server request with text and returns the tool's reply.
func (p *parked) answer(t *testing.T, text string) string {
	t.Helper()
	msg, err := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":%q},"model":"m"}}`, p.gid, text))
	if err != nil {
		t.Fatal(err)
	}
	p.c.Handle(context.Background(), &msg, nil)
	return p.out.reply(t)
}

// resultText returns the text of a one-block tools/call result, unescaped.
func resultText(reply string) string {
	var r struct {
		Result struct {
			Content []struct{ Text string }
		}
	}
	if json.Unmarshal([]byte(reply), &r) != nil || len(r.Result.Content) != 1 {
		return "not a one-block result: " + reply
	}
	return r.Result.Content[0].Text
}

// translators returns the PIDs of the pool's processes.
func translators(tr *translation) []int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var pids []int
	for _, tp := range tr.procs {
		pids = append(pids, pidOf(tp.p))
	}
	return pids
}

// TestTranslatedCapabilitiesDeclared: a translated request reaches a
// process initialized with the client capabilities it declared, not the
// gateway's; requests declaring the same set share a process, and the
// sessions' process keeps the gateway's.
func TestTranslatedCapabilitiesDeclared(t *testing.T) {
	s, tr, _ := translated(t, "caps")
	pids := map[string]string{}
	for _, tt := range []struct{ caps, want string }{
		{`{}`, `{}`},
		{`{"sampling":{}}`, `{"sampling":{}}`},
		{`{"roots":{"listChanged":true},"sampling":{"tools":{}},"elicitation":{}}`, `{"sampling":{},"elicitation":{"form":{}},"roots":{}}`},
		{`{"elicitation":{"url":{}},"experimental":{}}`, `{}`}, // URL mode alone: no form elicitation to declare
		{`{"sampling":null}`, `{}`},
	} {
		c, _ := openTranslated(t, s, tt.caps)
		if got := resultText(callTool(t, c, "capabilities", `{}`)); got != tt.want {
			t.Errorf("declaring %s: the process was initialized with %s, want %s", tt.caps, got, tt.want)
		}
		pids[tt.caps] = toolText(callTool(t, c, "pid", `{}`))
	}
	if pids[`{}`] != pids[`{"elicitation":{"url":{}},"experimental":{}}`] || pids[`{}`] != pids[`{"sampling":null}`] {
		t.Errorf("requests declaring the same set went to different processes: %v", pids)
	}
	if pids[`{}`] == pids[`{"sampling":{}}`] {
		t.Errorf("requests with and without sampling share process %s", pids[`{}`])
	}
	if n := len(translators(tr)); n != 3 {
		t.Errorf("%d translation processes for 3 capability sets, want 3", n)
	}

	// Without sampling declared, a tool asking for it is refused at once
	// by the mux (the client cannot answer), not held.
	c, _ := openTranslated(t, s, `{}`)
	if r := callTool(t, c, "sample", `{"prompt":"p"}`); !strings.Contains(r, "cannot route") {
		t.Errorf("sampling without the capability: %s", r)
	}

	session, err := s.Open(context.Background(), newStream())
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	out := newStream()
	handle(t, session, initialize, out)
	out.next(t)
	handle(t, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"capabilities","arguments":{}}}`, out)
	if got := resultText(string(out.next(t))); !strings.Contains(got, "sampling") || !strings.Contains(got, "elicitation") || !strings.Contains(got, "roots") {
		t.Errorf("the sessions' process was initialized with %s, want the gateway's capabilities", got)
	}
}

// TestTranslatedParkedDoesNotBlockOthers: while one client's request waits
// for its answer to the server's sampling request (parked), another
// client's request goes to another process, where the server's sampling
// request is attributed to it; both get their own results, and each
// request counts in Pending.
func TestTranslatedParkedDoesNotBlockOthers(t *testing.T) {
	s, tr, _ := translated(t, "parked")
	a, _ := openTranslated(t, s, `{"sampling":{}}`)
	pa := park(t, a, "question A")
	b, _ := openTranslated(t, s, `{"sampling":{}}`)
	pb := park(t, b, "question B") // on A's process: refused, "cannot route"
	if got := toolText(pb.answer(t, "answer B")); got != "answer B" {
		t.Errorf("B's result %q", got)
	}
	if n := len(translators(tr)); n != 2 {
		t.Errorf("%d translation processes, want 2 (one waits for A's input)", n)
	}
	c, _ := openTranslated(t, s, `{"sampling":{}}`)
	pc := park(t, c, "question C") // B's process is free again
	testkit.WaitFor(t, "A and C pending", func() bool { return s.Pending() == 2 })
	if got := toolText(pc.answer(t, "answer C")); got != "answer C" {
		t.Errorf("C's result %q", got)
	}
	if got := toolText(pa.answer(t, "answer A")); got != "answer A" {
		t.Errorf("A's result %q", got)
	}
	if n := len(translators(tr)); n != 2 {
		t.Errorf("%d translation processes after C, want 2: C reuses the free extra", n)
	}
	if n := s.Pending(); n != 0 {
		t.Errorf("Pending %d after every request was answered", n)
	}
}

// TestTranslatedIdleExtraStops: an extra process stops once it has had no
// connection for the idle time; its set's first process, with a request
// still parked on it, does not; the next parked request starts an extra
// again.
func TestTranslatedIdleExtraStops(t *testing.T) {
	s, tr, marker := translated(t, "idle")
	tr.idle = 50 * time.Millisecond // before any request: static from then on
	a, _ := openTranslated(t, s, `{"sampling":{}}`)
	pa := park(t, a, "A")
	b, _ := openTranslated(t, s, `{"sampling":{}}`)
	if r := callTool(t, b, "echo", `{"message":"on the extra"}`); toolText(r) != "on the extra" {
		t.Fatalf("echo on the extra: %s", r)
	}
	pids := translators(tr)
	if len(pids) != 2 {
		t.Fatalf("translation processes %v, want 2", pids)
	}
	extra := pids[1]
	b.Close()
	testkit.WaitFor(t, "the idle extra to stop", func() bool { return len(translators(tr)) == 1 })
	testkit.WaitFor(t, "its process to be gone", func() bool {
		for _, p := range testkit.FindProcs(marker) {
			if p.PID == extra && p.State != "Z" {
				return false
			}
		}
		return true
	})
	if got := translators(tr); got[0] != pids[0] {
		t.Errorf("the first process %d was stopped (now %v)", pids[0], got)
	}
	c, _ := openTranslated(t, s, `{"sampling":{}}`)
	pc := park(t, c, "C")
	if n := len(translators(tr)); n != 2 {
		t.Errorf("%d translation processes with A parked and C asking, want 2", n)
	}
	if got := toolText(pc.answer(t, "c")); got != "c" {
		t.Errorf("C's result %q", got)
	}
	if got := toolText(pa.answer(t, "a")); got != "a" {
		t.Errorf("A's result %q (its process idled for %v meanwhile)", got, tr.idle)
	}
}

// TestTranslatedListChangedRelayed: a list_changed broadcast of one
// translation process reaches the connections of the others (a listen is
// served from its connection's broadcasts), once each.
func TestTranslatedListChangedRelayed(t *testing.T) {
	s, tr, _ := translated(t, "relay")
	l, lg := openTranslated(t, s, `{}`)
	if _, err := l.ServerInit(context.Background()); err != nil { // binds it, as a listen does
		t.Fatal(err)
	}
	x, _ := openTranslated(t, s, `{"sampling":{}}`)
	y, yg := openTranslated(t, s, `{"sampling":{}}`)
	if _, err := y.ServerInit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := callTool(t, x, "list_changed", `{}`); toolText(r) != "ok" {
		t.Fatalf("list_changed: %s", r)
	}
	count := func(r *recorder) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, s := range r.sends {
			if strings.Contains(s, `"notifications/tools/list_changed"`) {
				n++
			}
		}
		return n
	}
	lg.wait(t, "the relayed list_changed", func(sends, _ []string) bool {
		return strings.Contains(strings.Join(sends, ""), "notifications/tools/list_changed")
	})
	// The server's next line is read after the broadcast was delivered
	// to every client of its process.
	if r := callTool(t, x, "echo", `{"message":"after"}`); toolText(r) != "after" {
		t.Fatalf("echo: %s", r)
	}
	if n := count(yg); n != 1 {
		t.Errorf("a connection on the broadcasting process got %d list_changed, want 1", n)
	}
	if n := count(lg); n != 1 {
		t.Errorf("a connection on another process got %d list_changed, want 1", n)
	}
	if n := len(translators(tr)); n != 2 {
		t.Errorf("%d translation processes, want 2", n)
	}
}

// TestTranslatedCloseStopsAll: Close with requests in flight on several
// translation processes (an extra among them) answers each with an error,
// returns within the stop bound, and leaves no process (newMarked's
// cleanup checks) or goroutine (TestMain's goleak).
func TestTranslatedCloseStopsAll(t *testing.T) {
	s, tr, _ := translated(t, "close")
	a, _ := openTranslated(t, s, `{"sampling":{}}`)
	pa := park(t, a, "A")
	var outs []*recorder
	for _, caps := range []string{`{"sampling":{}}`, `{}`, `{"roots":{}}`} {
		c, _ := openTranslated(t, s, caps)
		out := newRecorder()
		msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000},`+modernMeta+`}}`, caps))
		c.Handle(context.Background(), &msg, out)
		outs = append(outs, out)
	}
	testkit.WaitFor(t, "4 requests pending", func() bool { return s.Pending() == 4 })
	if n := len(translators(tr)); n != 4 {
		t.Fatalf("%d translation processes, want 4", n)
	}
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 2*StopGrace+time.Second {
		t.Errorf("Close took %v", d)
	}
	for i, out := range append(outs, pa.out) {
		if r := out.reply(t); !strings.Contains(r, `"error"`) {
			t.Errorf("request %d in flight at Close: %s", i, r)
		}
	}
	if c, err := s.OpenStateless(context.Background(), newRecorder(), protocol.StatelessVersion, []byte(`{}`)); err == nil {
		c.Close()
		t.Error("OpenStateless after Close succeeded")
	}
}
