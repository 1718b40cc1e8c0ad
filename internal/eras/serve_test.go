package eras

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/seal"
)

// askingSC is a connection to a server of the session eras that, for a
// tools/call, asks its client for sampling and answers the call with what
// the client answered.
type askingSC struct {
	pass bool

	mu   sync.Mutex
	got  []string    // messages it was handed, as they came
	out  conn.Stream // the call's stream
	call []byte      // the call's id as it came
}

func (sc *askingSC) Handle(_ context.Context, msg *jsonrpc.Message, out conn.Stream) {
	sc.mu.Lock()
	sc.got = append(sc.got, string(msg.Raw))
	sc.mu.Unlock()
	switch {
	case msg.Kind == jsonrpc.KindRequest:
		sc.mu.Lock()
		sc.out, sc.call = out, append([]byte(nil), msg.Bytes(msg.ID)...)
		sc.mu.Unlock()
		out.Send([]byte(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`))
	case msg.Kind == jsonrpc.KindResponse:
		var r struct {
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(msg.Raw, &r)
		sc.mu.Lock()
		out, id := sc.out, sc.call
		sc.mu.Unlock()
		out.Reply(jsonrpc.Response(id, []byte(`{"content":[{"type":"text","text":`+string(mustQuote(string(r.Result)))+`}]}`)))
	}
}
func (sc *askingSC) Version() string     { return "2025-11-25" }
func (sc *askingSC) Abandon(conn.Stream) {}
func (sc *askingSC) Close()              {}
func (sc *askingSC) CloseWith(string)    {}

// stateless is sc as the stateless connection Route and Serve take.
func (sc *askingSC) stateless() conn.StatelessConn {
	return conn.NewStatelessConn(sc, sc.ServerInit, sc.Passthrough())
}
func (sc *askingSC) Passthrough() bool { return sc.pass }
func (sc *askingSC) ServerInit(context.Context) ([]byte, error) {
	return []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`), nil
}

func mustQuote(s string) []byte { b, _ := json.Marshal(s); return b }

// waitStream is a Stream whose reply a test waits for.
type waitStream struct{ reply chan []byte }

func newWaitStream() *waitStream       { return &waitStream{reply: make(chan []byte, 1)} }
func (w *waitStream) Send([]byte)      {}
func (w *waitStream) Reply(msg []byte) { w.reply <- msg }
func (w *waitStream) wait(t *testing.T) []byte {
	t.Helper()
	select {
	case msg := <-w.reply:
		return msg
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
		return nil
	}
}

func checked(t *testing.T, raw string) (*jsonrpc.Message, Request) {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(HeaderProtocolVersion, protocol.StatelessVersion)
	var p struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	_ = json.Unmarshal(m.Raw, &p)
	h.Set(HeaderMethod, p.Method)
	if p.Params.Name != "" {
		h.Set(HeaderName, p.Params.Name)
	}
	req, prob := Check(h, &m)
	if prob != nil {
		t.Fatalf("Check(%s): %+v", raw, prob)
	}
	return &m, req
}

const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`

// TestServeInputRequired: a translated tools/call whose server asks for
// sampling is answered input_required; the retry, unparked by its state
// for the same target and principal only, sends the client's answer up
// and gets the server's result under its own id; the state does not open
// twice.
func TestServeInputRequired(t *testing.T) {
	var released []string
	p := &Parking[string]{Ring: seal.NewRandom(), Wait: time.Minute, Release: func(s, reason string) { released = append(released, s+": "+reason) }}
	defer p.Close()
	sc := &askingSC{}
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t",` + statelessMeta + `}}`
	msg, req := checked(t, call)
	if r := p.Route(sc.stateless(), msg, req); r != RouteCall {
		t.Fatalf("Route = %v, want RouteCall", r)
	}
	st := newWaitStream()
	x, prob := p.Serve(context.Background(), sc.stateless(), msg, req, Origin[string]{Session: "s1", Target: "srv", Owner: "alice"}, st)
	if prob != nil {
		t.Fatal(prob)
	}
	first := st.wait(t)
	var ir struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal(first, &ir); err != nil || ir.Result.ResultType != "input_required" || string(ir.ID) != "7" || len(ir.Result.InputRequests) != 1 {
		t.Fatalf("first answer %s, want input_required for id 7 with one request", first)
	}
	if !x.Parked() || p.Len() != 1 {
		t.Fatalf("parked %v, table %d: want the request parked", x.Parked(), p.Len())
	}
	var key string
	for k := range ir.Result.InputRequests {
		key = k
	}
	retry := `{"jsonrpc":"2.0","id":"r-8","method":"tools/call","params":{"name":"t","inputResponses":{` + string(mustQuote(key)) +
		`:{"model":"m","role":"assistant","content":{"type":"text","text":"hi"}}},"requestState":` + string(mustQuote(ir.Result.RequestState)) + `,` + statelessMeta + `}}`
	rmsg, rreq := checked(t, retry)
	if r := p.Route(sc.stateless(), rmsg, rreq); r != RouteResume {
		t.Fatalf("Route(retry) = %v, want RouteResume", r)
	}
	if _, prob := p.Unpark(rmsg, "srv", "bob"); prob == nil || prob.Status != http.StatusBadRequest {
		t.Fatalf("another principal's retry: %+v, want 400", prob)
	}
	got, prob := p.Unpark(rmsg, "srv", "alice")
	if prob != nil || got != x || got.Session() != "s1" {
		t.Fatalf("Unpark: %v %+v, want the parked request", got, prob)
	}
	if _, prob := p.Unpark(rmsg, "srv", "alice"); prob == nil {
		t.Fatal("the state opened twice")
	}
	st2 := newWaitStream()
	if prob := x.Resume(rmsg, st2); prob != nil {
		t.Fatal(prob)
	}
	final := string(st2.wait(t))
	if !strings.HasPrefix(final, `{"jsonrpc":"2.0","id":"r-8",`) || !strings.Contains(final, `"resultType":"complete"`) || !strings.Contains(final, `hi`) {
		t.Errorf("final answer %s, want the server's result with the retry's id", final)
	}
	if x.Parked() || p.Len() != 0 || len(released) != 0 {
		t.Errorf("after the result: parked %v, table %d, released %q", x.Parked(), p.Len(), released)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.got) != 2 || strings.Contains(sc.got[0], "io.modelcontextprotocol/") || !strings.Contains(sc.got[1], `"id":"s1"`) {
		t.Errorf("the server got %q: want the call without the revision's _meta, then the answer to its request", sc.got)
	}
}

// TestServeExpiry: a parked request whose retry does not come within Wait
// is released, its record ended with the reason.
func TestServeExpiry(t *testing.T) {
	released := make(chan string, 1)
	p := &Parking[string]{Ring: seal.NewRandom(), Wait: 50 * time.Millisecond, Release: func(s, reason string) { released <- s + ": " + reason }}
	defer p.Close()
	msg, req := checked(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",`+statelessMeta+`}}`)
	st := newWaitStream()
	if _, prob := p.Serve(context.Background(), (&askingSC{}).stateless(), msg, req, Origin[string]{Session: "s1"}, st); prob != nil {
		t.Fatal(prob)
	}
	st.wait(t) // input_required
	select {
	case r := <-released:
		if !strings.HasPrefix(r, "s1: no retry with inputResponses came within") {
			t.Errorf("released %q", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never released")
	}
	if p.Len() != 0 {
		t.Errorf("%d still parked", p.Len())
	}
}

// TestServeAbandonedWhileGathering: a client that leaves while its
// input_required answer waits for more server requests (askGather) leaves
// nothing parked: no table entry or timer lives on for a request that was
// cancelled upstream and that nobody can retry, and no answer goes out.
// In a synctest bubble: the gathering's timer fires when the test's clock
// passes it, not after a wait.
func TestServeAbandonedWhileGathering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Parking[string]{Ring: seal.NewRandom(), Wait: time.Minute, Release: func(string, string) {}}
		defer p.Close()
		msg, req := checked(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",`+statelessMeta+`}}`)
		st := newWaitStream()
		x, prob := p.Serve(context.Background(), (&askingSC{}).stateless(), msg, req, Origin[string]{Session: "s1"}, st)
		if prob != nil {
			t.Fatal(prob)
		}
		// The server asked (in Handle): the answer is gathering. The
		// client leaves before it goes out.
		x.Abandon()
		time.Sleep(2 * askGather)
		synctest.Wait()
		if n := p.Len(); n != 0 || x.Parked() {
			t.Errorf("%d parked (this request: %v) after its client left", n, x.Parked())
		}
		select {
		case got := <-st.reply:
			t.Errorf("answered %s after its client left", got)
		default:
		}
	})
}

// TestRoute: a passthrough server answers everything itself; for one of
// the session eras the gateway answers discover and listen, and resumes
// retries carrying a state of its own shape only.
func TestRoute(t *testing.T) {
	p := &Parking[string]{Ring: seal.NewRandom()}
	p.init()
	ours := p.Ring.Seal(parkedPurpose, make([]byte, handleLen+32), time.Minute) // the shape of a state of ours
	retry := func(state string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","inputResponses":{},"requestState":` + string(mustQuote(state)) + `,` + statelessMeta + `}}`
	}
	for _, tt := range []struct {
		raw  string
		pass bool
		want Route
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + statelessMeta + `}}`, false, RouteDiscover},
		{`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + statelessMeta + `}}`, true, RouteCall},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{},` + statelessMeta + `}}`, false, RouteListen},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{},` + statelessMeta + `}}`, true, RouteCall},
		{retry(ours), false, RouteResume},
		{retry(ours), true, RouteCall},
		{retry("the-server-s-own"), false, RouteCall},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + statelessMeta + `}}`, false, RouteCall},
	} {
		msg, req := checked(t, tt.raw)
		if got := p.Route((&askingSC{pass: tt.pass}).stateless(), msg, req); got != tt.want {
			t.Errorf("Route(%s, passthrough %v) = %v, want %v", tt.raw, tt.pass, got, tt.want)
		}
	}
}
