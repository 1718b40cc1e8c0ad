package front

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// shortOwnerMargin makes a wedged owner cost a test two seconds, not
// thirteen: far above what a loopback answer takes on a loaded machine,
// so that only an owner that holds the request reaches it.
func shortOwnerMargin(t *testing.T) {
	old := ownerMargin
	ownerMargin = 2 * time.Second
	t.Cleanup(func() { ownerMargin = old })
}

// wedgedOwner is a replica that takes every request and, but for the
// ones a test lets through, never answers: an httptest server holding
// the connection. It reports each request it holds (its body) on took,
// and on left when its context ends: the forwarding replica let go.
type wedgedOwner struct {
	srv        *httptest.Server
	took, left chan string
	release    chan struct{} // answers the held 2025-06-18 POST
	emit       chan struct{} // writes an event on the open stream
}

func startWedgedOwner(t *testing.T) *wedgedOwner {
	o := &wedgedOwner{took: make(chan string, 8), left: make(chan string, 8), release: make(chan struct{}), emit: make(chan struct{})}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		what := r.Method + " " + string(body)
		switch {
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "stream":
			// A stream that began: its headers at once, then silence
			// for longer than any header bound, then an event.
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			o.took <- what
			select {
			case <-o.emit:
				_, _ = io.WriteString(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"late\"}\n\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
			}
		case r.Header.Get("Mcp-Protocol-Version") == v0618:
			// An older session's call: its answer comes when it ends.
			o.took <- what
			select {
			case <-o.release:
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"slow","result":{}}`)
			case <-r.Context().Done():
			}
		default:
			o.took <- what
			<-r.Context().Done()
		}
		o.left <- what
	}))
	t.Cleanup(o.srv.Close)
	return o
}

// An owner that takes a forwarded request and begins no answer where its
// protocol bounds it (a POST of a 2025-11-25 session, a legacy POST, a
// GET) costs the client one 504 with its request's id, not a hang; the
// forward is cancelled (the owner sees its request end) and counted. An
// older session's call, which the owner answers only when it ends, and a
// stream whose headers came, are not cut by the bound.
func TestWedgedOwnerAnswered504(t *testing.T) {
	shortOwnerMargin(t)
	ring, cl := testRing(t), newMemCluster()
	b := startReplica(t, cl, "b", ring, newFakeBackend())
	o := startWedgedOwner(t)
	c := cl.replica("c", o.srv.Listener.Addr().String())
	sid, err := mintID(ring, c, "x", "", false, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	legacySid, err := mintID(ring, c, "x", "", true, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tidy := func() {
		b.h.forwardTransport.CloseIdleConnections()
		b.srv.Client().CloseIdleConnections()
	}
	baseline := testkit.SettleGoroutines(t, "before the forwards", runtime.NumGoroutine(), tidy)

	// The held older call, and the open stream, first: they outlive the
	// bounded requests below.
	slow := postAsync(t, b.srv, sid, v0618, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"hold"}}`)
	testkit.Receive(t, o.took, "the older session's call at the owner")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+mcpPath, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", protocol.Version20251125)
	req.Header.Set("Last-Event-ID", "stream")
	stream, err := b.srv.Client().Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("the stream through b: %v %v", stream, err)
	}
	defer stream.Body.Close()
	testkit.Receive(t, o.took, "the stream at the owner")

	type answer struct {
		what   string
		status int
		body   string
	}
	answers := make(chan answer, 3)
	ask := func(what, method, path, body string, hdr ...string) {
		go func() {
			resp, got := do(t, b.srv, method, path, body, hdr...)
			answers <- answer{what, resp.StatusCode, got}
		}()
	}
	call := `{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x\u00e9"}}}`
	ask("POST", http.MethodPost, mcpPath, call, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", protocol.Version20251125)
	legacyCall := `{"jsonrpc":"2.0","id":"x\u00e9","method":"ping"}`
	ask("legacy POST", http.MethodPost, "/servers/x/messages?sessionId="+legacySid, legacyCall)
	ask("GET", http.MethodGet, mcpPath, "", "Accept", "text/event-stream", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", protocol.Version20251125)
	wantID := map[string]string{"POST": `1.0`, "legacy POST": `"x\u00e9"`, "GET": `null`}
	for range 3 {
		a := testkit.Receive(t, answers, "the answer to a request the owner holds")
		if a.status != http.StatusGatewayTimeout {
			t.Errorf("%s held by the owner: %d %s, want 504", a.what, a.status, a.body)
			continue
		}
		// One JSON-RPC error, with the request's id as the client wrote it.
		dec := json.NewDecoder(strings.NewReader(a.body))
		var msg struct {
			ID    json.RawMessage
			Error struct{ Code int }
		}
		if err := dec.Decode(&msg); err != nil || dec.More() {
			t.Errorf("%s: body %q is not one message", a.what, a.body)
		}
		if string(msg.ID) != wantID[a.what] || msg.Error.Code != protocol.CodeRequestTimeout {
			t.Errorf("%s: id %s code %d, want id %s code %d", a.what, msg.ID, msg.Error.Code, wantID[a.what], protocol.CodeRequestTimeout)
		}
	}
	// The owner saw each of the three end: the forwards were cancelled.
	for range 3 {
		if got := testkit.Receive(t, o.left, "the owner's request ending"); strings.Contains(got, "hold") {
			t.Errorf("the older session's call was cut: %q", got)
		}
	}
	if f := b.h.Forwards(); f.Silent != 3 || f.Failed != 0 {
		t.Errorf("forwards: %+v, want 3 silent, none failed", f)
	}

	// The stream and the older call outlived the bound: the stream still
	// carries the owner's next event, the call gets the owner's answer.
	o.emit <- struct{}{}
	line, err := bufio.NewReader(stream.Body).ReadString('\n')
	if err != nil || line != "id: 1\n" {
		t.Errorf("the open stream after the bound: %q %v, want the owner's event", line, err)
	}
	close(o.release)
	if got := testkit.Receive(t, slow, "the older session's call"); !strings.HasPrefix(got, "200") || !strings.Contains(got, `"id":"slow"`) {
		t.Errorf("the older session's call: %q, want the owner's answer", got)
	}
	if f := b.h.Forwards(); f.Silent != 3 || f.Forwarded != 2 {
		t.Errorf("forwards: %+v, want the stream and the call forwarded", f)
	}
	cancel()
	if !b.h.handlers.wait(testkit.WaitTimeout) {
		t.Errorf("b's handlers still run")
	}
	testkit.SettleGoroutines(t, "after the forwards", baseline, tidy)
}

// The owner's headers and the clock running out race: whichever comes
// first decides, and the other changes nothing, so that a timer firing
// as the headers come never cuts the answer that began.
func TestOwnerClockFirstDecides(t *testing.T) {
	for _, headersFirst := range []bool{true, false} {
		var cause error
		c := &ownerClock{wait: time.Hour, cancel: func(err error) { cause = err }}
		c.wrote(httptrace.WroteRequestInfo{})
		var inTime bool
		if headersFirst {
			inTime = c.stop()
			c.expire() // the timer's func, run late
		} else {
			c.expire()
			inTime = c.stop()
		}
		if inTime != headersFirst || c.expired() == headersFirst || (cause == nil) == !headersFirst {
			t.Errorf("headers first %v: in time %v, expired %v, cancelled with %v", headersFirst, inTime, c.expired(), cause)
		}
	}
}
