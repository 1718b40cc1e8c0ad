package front

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// ---- a scriptable in-process server behind the stateless path ----------

type atkBackend struct {
	conn.OwnerBound
	script   func(c *atkConn, id string, msg *jsonrpc.Message, out conn.Stream)
	opens    atomic.Int32
	closes   atomic.Int32
	abandons atomic.Int32
	conns    chan *atkConn
	held     chan heldCall // calls a script holds for the test
}

type heldCall struct {
	c  *atkConn
	id string
}

func newAtkBackend(script func(c *atkConn, id string, msg *jsonrpc.Message, out conn.Stream)) *atkBackend {
	return &atkBackend{script: script, conns: make(chan *atkConn, 4096), held: make(chan heldCall, 4096)}
}

func (b *atkBackend) Open(context.Context, conn.Stream) (conn.Conn, error) {
	return nil, errors.New("sessions not served by this fake")
}

func (b *atkBackend) OpenStateless(_ context.Context, _ conn.Stream, _ string, _ []byte) (conn.StatelessConn, error) {
	b.opens.Add(1)
	c := &atkConn{b: b, calls: map[string]conn.Stream{}, asks: map[string]func(*jsonrpc.Message){}}
	select {
	case b.conns <- c:
	default:
	}
	return conn.NewStatelessConn(c, c.ServerInit, c.Passthrough()), nil
}

func (b *atkBackend) ServesStateless() bool { return true }

type atkConn struct {
	b      *atkBackend
	mu     sync.Mutex
	closed bool
	calls  map[string]conn.Stream
	asks   map[string]func(*jsonrpc.Message)
	next   int
	got    []string // responses to server requests, as received
}

func toolName(msg *jsonrpc.Message) string {
	var p struct {
		Params struct{ Name string } `json:"params"`
	}
	_ = json.Unmarshal(msg.Raw, &p)
	return p.Params.Name
}

func (c *atkConn) Handle(_ context.Context, msg *jsonrpc.Message, out conn.Stream) {
	switch msg.Kind {
	case jsonrpc.KindRequest:
		id := string(msg.Bytes(msg.ID))
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			out.Reply(jsonrpc.ErrorResponse([]byte(id), protocol.CodeServerError, "closed"))
			return
		}
		c.calls[id] = out
		c.mu.Unlock()
		c.b.script(c, id, msg, out)
	case jsonrpc.KindResponse:
		id := string(msg.Bytes(msg.ID))
		c.mu.Lock()
		f := c.asks[id]
		delete(c.asks, id)
		c.got = append(c.got, string(msg.Raw))
		c.mu.Unlock()
		if f != nil {
			f(msg)
		}
	}
}

// ask sends a server request on out; f sees the client's answer.
func (c *atkConn) ask(out conn.Stream, method, params string, f func(*jsonrpc.Message)) {
	c.mu.Lock()
	c.next++
	id := strconv.Itoa(c.next)
	c.asks[id] = f
	c.mu.Unlock()
	out.Send(jsonrpc.Request([]byte(id), method, []byte(params)))
}

func (c *atkConn) take(id string) conn.Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls[id]
	delete(c.calls, id)
	return out
}

func (c *atkConn) reply(id, result string) {
	if out := c.take(id); out != nil {
		out.Reply(jsonrpc.Response([]byte(id), []byte(result)))
	}
}

func (c *atkConn) fail(id, text string) {
	if out := c.take(id); out != nil {
		out.Reply(jsonrpc.ErrorResponse([]byte(id), protocol.CodeServerError, text))
	}
}

func (c *atkConn) pendingCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

func (c *atkConn) Version() string { return "" }

func (c *atkConn) Abandon(out conn.Stream) {
	c.b.abandons.Add(1)
	c.mu.Lock()
	for id, o := range c.calls {
		if o == out {
			delete(c.calls, id)
		}
	}
	c.mu.Unlock()
}

func (c *atkConn) Close() {
	c.b.closes.Add(1)
	c.mu.Lock()
	c.closed = true
	calls := c.calls
	c.calls = map[string]conn.Stream{}
	c.mu.Unlock()
	for id, out := range calls {
		out.Reply(jsonrpc.ErrorResponse([]byte(id), protocol.CodeServerError, "mcpgate: session closed"))
	}
}

func (c *atkConn) ServerInit(context.Context) ([]byte, error) { return []byte(testInit), nil }

func (c *atkConn) Passthrough() bool { return false }

func (c *atkConn) CloseWith(string) { c.Close() }

// textResult is a tools/call result carrying s.
func textResult(s string) string {
	b, _ := json.Marshal(s)
	return `{"content":[{"type":"text","text":` + string(b) + `}]}`
}

// ---- the client side -----------------------------------------------------

func atkServer(t *testing.T, b *atkBackend, cfg Config) (*Handler, string) {
	t.Helper()
	cfg.Backends = map[string]conn.Backend{"x": b}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return h, srv.URL
}

const atkMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{},"roots":{}}}`

// atkBody is a modern request; name "" for methods without one; extra is
// raw params members (with a leading comma) or "".
func atkBody(id, method, name, extra string) string {
	p := ""
	if name != "" {
		p = `"name":` + strconv.Quote(name) + `,"arguments":{}`
	}
	if extra != "" {
		if p == "" {
			p = extra[1:]
		} else {
			p += extra
		}
	}
	if p != "" {
		p += ","
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + p + atkMeta + `}}`
}

type atkResult struct {
	Status int
	SSE    bool
	Msgs   []string // the JSON body, or each SSE data
	Err    error
}

func (r atkResult) last() map[string]json.RawMessage {
	if len(r.Msgs) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(r.Msgs[len(r.Msgs)-1]), &m)
	return m
}

func atkPost(ctx context.Context, url, body string, hdr ...string) atkResult {
	return atkPostTo(ctx, url, mcpPath, body, hdr...)
}

// atkPostTo is atkPost to another path than server x's.
func atkPostTo(ctx context.Context, url, path, body string, hdr ...string) atkResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		return atkResult{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	var m struct {
		Method string
		Params struct{ Name, URI string }
	}
	_ = json.Unmarshal([]byte(body), &m)
	req.Header.Set("Mcp-Method", m.Method)
	if m.Params.Name != "" {
		req.Header.Set("Mcp-Name", m.Params.Name)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return atkResult{Err: err}
	}
	defer resp.Body.Close()
	out := atkResult{Status: resp.StatusCode}
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		out.SSE = true
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out.Msgs = append(out.Msgs, d)
			}
		}
		out.Err = sc.Err()
		return out
	}
	b, err := io.ReadAll(resp.Body)
	out.Err = err
	if len(b) > 0 {
		out.Msgs = []string{string(b)}
	}
	return out
}

// inputReq decodes an input_required result.
type inputReq struct {
	ResultType    string
	InputRequests map[string]struct {
		Method string
		Params json.RawMessage
	}
	RequestState string
}

func asInputRequired(t *testing.T, r atkResult) inputReq {
	t.Helper()
	var ir inputReq
	m := r.last()
	if r.Err != nil || m == nil || json.Unmarshal(m["result"], &ir) != nil || ir.ResultType != "input_required" || ir.RequestState == "" {
		t.Fatalf("want input_required, got %d %v %q", r.Status, r.Err, r.Msgs)
	}
	return ir
}

// inputAnswers builds the retry members answering every input request of ir.
func inputAnswers(ir inputReq, keys ...string) string {
	if keys == nil {
		for k := range ir.InputRequests {
			keys = append(keys, k)
		}
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, strconv.Quote(k)+`:{"role":"assistant","content":{"type":"text","text":"ans-`+k+`"},"model":"m"}`)
	}
	st, _ := json.Marshal(ir.RequestState)
	return `,"inputResponses":{` + strings.Join(parts, ",") + `},"requestState":` + string(st)
}

// waitSessions waits up to d for h to hold want sessions and returns how
// many it holds. d is a failure bound, below the InputWait expiry that would
// end a session left behind by a bug.
func waitSessions(h *Handler, want int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for h.Sessions() != want && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	return h.Sessions()
}

func parkedCount(h *Handler) int {
	return h.parking.Len()
}

// sampleScript: "sample" asks sampling once and returns the answer;
// "giveup" asks, then leaves the call to the test (held); "askreply" asks
// and replies at once; "two" asks twice at once; "chain" asks, and again
// once answered; "twoThenC" asks A and B, asks C as soon as A is answered
// and holds the call once B and C are answered; "custom" asks a
// non-MRTR method; "hold" is held.
func mrtrScript(c *atkConn, id string, msg *jsonrpc.Message, out conn.Stream) {
	const sp = `{"messages":[{"role":"user","content":{"type":"text","text":"q"}}],"maxTokens":5}`
	switch msg.MethodName() {
	case "tools/list":
		// A server request during a method that cannot take input.
		c.ask(out, "elicitation/create", `{"message":"m","requestedSchema":{"type":"object","properties":{}}}`, func(resp *jsonrpc.Message) {
			c.reply(id, `{"tools":[],"_seen":`+string(resp.Raw)+`}`)
		})
		return
	case "tools/call":
	default:
		c.reply(id, `{}`)
		return
	}
	switch toolName(msg) {
	case "sample":
		c.ask(out, "sampling/createMessage", sp, func(resp *jsonrpc.Message) { c.reply(id, textResult(string(resp.Raw))) })
	case "giveup":
		c.ask(out, "sampling/createMessage", sp, nil)
		c.b.held <- heldCall{c, id}
	case "askreply":
		c.ask(out, "sampling/createMessage", sp, nil)
		c.reply(id, textResult("done without waiting"))
	case "progressAskReply":
		out.Send(jsonrpc.Notification("notifications/progress", []byte(`{"progressToken":1,"progress":1}`)))
		c.ask(out, "sampling/createMessage", sp, nil)
		c.reply(id, textResult("done without waiting"))
	case "two":
		var n atomic.Int32
		done := func(*jsonrpc.Message) {
			if n.Add(1) == 2 {
				c.reply(id, textResult("both"))
			}
		}
		c.ask(out, "sampling/createMessage", sp, done)
		c.ask(out, "elicitation/create", `{"message":"m","requestedSchema":{"type":"object","properties":{}}}`, done)
	case "chain":
		c.ask(out, "sampling/createMessage", sp, func(*jsonrpc.Message) {
			c.ask(out, "roots/list", `{}`, func(*jsonrpc.Message) { c.reply(id, textResult("chained")) })
		})
	case "twoThenC":
		var n atomic.Int32
		done := func(*jsonrpc.Message) {
			if n.Add(1) == 2 {
				c.b.held <- heldCall{c, id}
			}
		}
		c.ask(out, "sampling/createMessage", sp, func(*jsonrpc.Message) {
			// The server asks again the moment it has A's answer.
			c.ask(out, "roots/list", `{}`, done)
		})
		c.ask(out, "elicitation/create", `{"message":"B","requestedSchema":{"type":"object","properties":{}}}`, done)
	case "custom":
		c.ask(out, "x/custom", `{}`, func(resp *jsonrpc.Message) { c.reply(id, textResult(string(resp.Raw))) })
	case "hold", "sampleHold":
		if toolName(msg) == "sampleHold" {
			c.ask(out, "sampling/createMessage", sp, func(*jsonrpc.Message) { c.b.held <- heldCall{c, id} })
			return
		}
		c.b.held <- heldCall{c, id}
	default:
		c.reply(id, textResult("plain"))
	}
}

func ctxT(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// ---- attacks -------------------------------------------------------------

// F1: the server's final reply arrives while the request is parked (its
// own sampling request timed out upstream, or the gateway's per-request
// timeout fired, or the server was cancelled). The client then retries
// with a valid state: the retry must be answered, not hang.
func TestAttackReplyWhileParkedRetryHangs(t *testing.T) {
	b := newAtkBackend(mrtrScript)
	h, url := atkServer(t, b, Config{})
	ctx, cancel := ctxT(5 * time.Second)
	defer cancel()
	ir := asInputRequired(t, atkPost(ctx, url, atkBody("1", "tools/call", "giveup", "")))
	hc := testkit.Receive(t, b.held, "the held call")
	hc.c.fail(hc.id, "sampling request timed out") // the server gives up
	time.Sleep(50 * time.Millisecond)

	rctx, rcancel := ctxT(3 * time.Second)
	defer rcancel()
	start := time.Now()
	r := atkPost(rctx, url, atkBody("2", "tools/call", "giveup", inputAnswers(ir)))
	if r.Err != nil {
		t.Errorf("retry after the server already answered: no answer within %v (%v); sessions %d, parked %d",
			time.Since(start).Round(time.Millisecond), r.Err, h.Sessions(), parkedCount(h))
	} else {
		t.Logf("retry answered: %d %q", r.Status, r.Msgs)
	}
	if n := waitSessions(h, 0, testkit.WaitTimeout); n != 0 { // below the 2 min default InputWait
		t.Errorf("%d sessions left", n)
	}
}

// F2: the server asks and answers at once (a fire-and-forget request, or
// an answer racing the ask). The client gets one answer; the request's
// session must not outlive it.
func TestAttackAskRacesReply(t *testing.T) {
	for _, tool := range []string{"askreply", "progressAskReply"} {
		t.Run(tool, func(t *testing.T) {
			b := newAtkBackend(mrtrScript)
			const inputWait = time.Minute
			h, url := atkServer(t, b, Config{InputWait: inputWait})
			ctx, cancel := ctxT(5 * time.Second)
			defer cancel()
			r := atkPost(ctx, url, atkBody(`"q"`, "tools/call", tool, ""))
			finals := 0
			for _, m := range r.Msgs {
				if strings.Contains(m, `"id":"q"`) {
					finals++
				}
			}
			if r.Err != nil || finals != 1 {
				t.Errorf("want exactly one reply for id \"q\", got %d: %v %q", finals, r.Err, r.Msgs)
			}
			// The server's reply may come within the moment an answer
			// waits for more server requests (askGather): then it is the
			// answer, and nothing is left.
			if m := r.last(); !strings.Contains(string(m["result"]), "input_required") {
				if !strings.Contains(string(m["result"]), "done without waiting") {
					t.Errorf("want input_required or the server's result, got %q", r.Msgs)
				}
				if n := waitSessions(h, 0, inputWait/2); n != 0 {
					t.Errorf("%d sessions still live after the answer", n)
				}
				return
			}
			// Else the server's reply, come while the client was asked, is
			// the retry's answer; then nothing is left.
			ir := asInputRequired(t, r)
			retry := atkPost(ctx, url, atkBody(`"q2"`, "tools/call", tool, inputAnswers(ir)))
			if m := retry.last(); !strings.Contains(string(m["result"]), "done without waiting") || string(m["id"]) != `"q2"` {
				t.Errorf("retry: %d %v %q", retry.Status, retry.Err, retry.Msgs)
			}
			if n := waitSessions(h, 0, inputWait/2); n != 0 {
				t.Errorf("%d sessions (parked %d) still live after the retry was answered", n, parkedCount(h))
			}
		})
	}
}

// F3: the retry takes the entry out of the table just after its timer
// fired, before the timer's goroutine (expire) took the lock. The lock is
// held here only to widen that window; the interleaving is possible
// without it.
func TestAttackUnparkRacesExpire(t *testing.T) {
	b := newAtkBackend(mrtrScript)
	const wait = 200 * time.Millisecond
	h, url := atkServer(t, b, Config{InputWait: wait})
	ctx, cancel := ctxT(5 * time.Second)
	defer cancel()
	start := time.Now()
	ir := asInputRequired(t, atkPost(ctx, url, atkBody("1", "tools/call", "sampleHold", "")))
	if time.Since(start) > wait/2 {
		t.Skip("too slow to hit the window")
	}
	unlock := h.parking.LockForTest()
	got := make(chan atkResult, 1)
	go func() { got <- atkPost(ctx, url, atkBody("2", "tools/call", "sampleHold", inputAnswers(ir))) }()
	time.Sleep(time.Until(start.Add(wait + 50*time.Millisecond))) // retry passed its expiry check; the timer fired
	unlock()
	r := <-got
	t.Logf("retry: %d %q", r.Status, r.Msgs)
	if strings.Contains(strings.Join(r.Msgs, ""), "-32602") {
		// The retry lost: the request must still be ended by expiry.
		if n := waitSessions(h, 0, testkit.WaitTimeout); n != 0 {
			t.Errorf("retry refused at expiry, yet %d session(s) live %v later (parked %d, conns closed %d): nobody ends it", n, testkit.WaitTimeout, parkedCount(h), b.closes.Load())
		}
	}
}

// F4: the retry answers A but not B; the server asks C the moment it has
// A's answer. resume re-parks for B after ask already parked for C: two
// states for one request, one of them never given to the client. When
// that orphan's timer fires it ends the request, although the client
// answered in time with the state it was given.
func TestAttackOrphanStateKillsLiveRequest(t *testing.T) {
	b := newAtkBackend(mrtrScript)
	// The retries must come within wait of the first park, however busy
	// the machine: a few round trips, so seconds.
	const wait = 2 * time.Second
	h, url := atkServer(t, b, Config{InputWait: wait})
	ctx, cancel := ctxT(20 * time.Second)
	defer cancel()
	ir := asInputRequired(t, atkPost(ctx, url, atkBody("1", "tools/call", "twoThenC", "")))
	var keyA string
	for k, q := range ir.InputRequests {
		if q.Method == "sampling/createMessage" {
			keyA = k
		}
	}
	r := atkPost(ctx, url, atkBody("2", "tools/call", "twoThenC", inputAnswers(ir, keyA)))
	ir2 := asInputRequired(t, r)
	if p := parkedCount(h); p != 1 {
		t.Errorf("%d states registered for one parked request (want 1); the client got %d input requests", p, len(ir2.InputRequests))
	}
	// Answer everything asked, round after round (C comes in the round
	// after B); the server then takes a while (held).
	r3 := make(chan atkResult, 1)
	go func() {
		ir := ir2
		for i := 3; ; i++ {
			r := atkPost(ctx, url, atkBody(strconv.Itoa(i), "tools/call", "twoThenC", inputAnswers(ir)))
			var next inputReq
			if m := r.last(); i < 8 && m != nil && json.Unmarshal(m["result"], &next) == nil && next.ResultType == "input_required" {
				ir = next
				continue
			}
			r3 <- r
			return
		}
	}()
	hc := testkit.Receive(t, b.held, "the call to be held")
	time.Sleep(2 * wait) // well past the first states' InputWait: the retry came in time
	hc.c.reply(hc.id, textResult("late but fine"))
	got := <-r3
	if m := got.last(); !strings.Contains(string(m["result"]), "late but fine") {
		t.Errorf("retry answered in time, yet got %d %q", got.Status, got.Msgs)
	}
}

// A server request that is not one of the three MRTR methods, during
// tools/call: the revision has no place for it in inputRequests.
func TestAttackNonMRTRServerRequest(t *testing.T) {
	b := newAtkBackend(mrtrScript)
	_, url := atkServer(t, b, Config{})
	ctx, cancel := ctxT(5 * time.Second)
	defer cancel()
	r := atkPost(ctx, url, atkBody("1", "tools/call", "custom", ""))
	if strings.Contains(strings.Join(r.Msgs, ""), `"method":"x/custom"`) {
		t.Errorf("server request x/custom relayed to the client as an input request: %q", r.Msgs)
	}
}
