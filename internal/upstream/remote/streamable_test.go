package remote

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// initialize runs the initialize handshake through c.
func initialize(t *testing.T, c *Client, r *recorder) {
	t.Helper()
	send(t, c, initReq)
	r.waitLine(`"id":1`, "protocolVersion")
	send(t, c, inited)
}

func TestStreamableHeadersSessionAndDelete(t *testing.T) {
	f := newFake(t)
	url := f.run()
	c, r := start(t, Config{Name: "fake", URL: url, Transport: TransportHTTP,
		Headers: map[string]string{"Authorization": "Bearer s3cret", "X-Team": "a"}})
	if got := f.seen(); len(got) != 0 {
		t.Fatalf("Start touched the network: %v", got)
	}
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":"two","method":"tools/list"}`)
	r.waitLine(`"id":"two"`, `"method":"tools/list"`)
	c.Close()
	c.Close() // idempotent

	var sawDelete bool
	for _, s := range f.seen() {
		if got := s.header.Get("Authorization"); got != "Bearer s3cret" || s.header.Get("X-Team") != "a" {
			t.Errorf("%s %s: Authorization %q, X-Team %q", s.method, s.rpc, got, s.header.Get("X-Team"))
		}
		switch {
		case s.method == http.MethodPost:
			if ct, acc := s.header.Get("Content-Type"), s.header.Get("Accept"); ct != "application/json" ||
				!strings.Contains(acc, "application/json") || !strings.Contains(acc, "text/event-stream") {
				t.Errorf("POST %s: Content-Type %q, Accept %q", s.rpc, ct, acc)
			}
			if s.rpc == "initialize" {
				if s.header.Get("Mcp-Session-Id") != "" {
					t.Errorf("initialize carried a session id")
				}
				continue
			}
			fallthrough
		default:
			if sid, v := s.header.Get("Mcp-Session-Id"), s.header.Get("Mcp-Protocol-Version"); sid != "sess-1" || v != "2025-06-18" {
				t.Errorf("%s %s: Mcp-Session-Id %q, MCP-Protocol-Version %q", s.method, s.rpc, sid, v)
			}
		}
		sawDelete = sawDelete || s.method == http.MethodDelete
	}
	if !sawDelete {
		t.Error("Close sent no DELETE")
	}
	evs := r.snapshot()
	if evs[0].kind != "started" || evs[len(evs)-1].kind != "exited" || evs[len(evs)-1].err != nil {
		t.Errorf("events:\n%s", dump(evs))
	}
	if err := c.Send(t.Context(), []byte(inited)); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
}

func TestSendRejectsInvalidMessages(t *testing.T) {
	c, _ := start(t, Config{URL: "http://127.0.0.1:1/mcp"})
	if err := c.Send(t.Context(), []byte(`{"jsonrpc":"2.0"`)); !errors.Is(err, jsonrpc.ErrParse) {
		t.Errorf("truncated JSON: %v", err)
	}
	if err := c.Send(t.Context(), []byte(`{"id":1}`)); !errors.Is(err, jsonrpc.ErrInvalidRequest) {
		t.Errorf("not JSON-RPC: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{URL: "ftp://x/"},
		{URL: "http:///nohost"},
		{URL: "http://h/", Transport: "ws"},
		{URL: "http://h/", Headers: map[string]string{"Mcp-Session-Id": "x"}},
		{URL: "http://h/", Headers: map[string]string{"Bad Name": "x"}},
		{URL: "http://h/", Headers: map[string]string{"X-A": "a\r\nB: c"}},
	} {
		if _, err := Start(cfg, newRecorder(t)); err == nil {
			t.Errorf("Start(%+v) accepted", cfg)
		}
	}
}

// TestStreamableSSEResume: the POST's stream drops after a progress event;
// the Client resumes it with GET and Last-Event-ID and gets the reply.
func TestStreamableSSEResume(t *testing.T) {
	f := newFake(t)
	var lastIDs []string
	var mu sync.Mutex
	f.request = func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool {
		if method != "tools/call" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		flushWrite(w, "id: p-0\nretry: 1\ndata:\n\n")
		flushWrite(w, `id: p-1`+"\ndata: "+`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}`+"\n\n")
		return true // the connection ends here, before the reply
	}
	f.get = func(w http.ResponseWriter, r *http.Request) {
		last := r.Header.Get("Last-Event-ID")
		mu.Lock()
		lastIDs = append(lastIDs, last)
		mu.Unlock()
		if last != "p-1" {
			http.Error(w, "standalone stream not offered", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		flushWrite(w, "id: p-2\ndata: "+string(jsonrpc.Response([]byte("5"), []byte(`{"done":true}`)))+"\n\n")
	}
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP})
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"progressToken":7}}}`)
	r.waitLine(`"id":5`, `"done":true`)
	c.Close()
	if n := len(r.lines(`"id":5`)); n != 1 {
		t.Errorf("%d replies for id 5:\n%s", n, dump(r.snapshot()))
	}
	if len(r.lines("notifications/progress")) != 1 {
		t.Errorf("progress not delivered once:\n%s", dump(r.snapshot()))
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(strings.Join(lastIDs, ","), "p-1") {
		t.Errorf("GETs carried Last-Event-ID %q, want one with p-1", lastIDs)
	}
}

// TestStreamableSSEUnresumable: a stream that ends before the reply, with no
// event id to resume from (or a GET that refuses to resume), gets an error
// reply for its request.
func TestStreamableSSEUnresumable(t *testing.T) {
	for _, withID := range []bool{false, true} {
		t.Run(fmt.Sprintf("eventIDs=%v", withID), func(t *testing.T) {
			f := newFake(t)
			f.request = func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool {
				w.Header().Set("Content-Type", "text/event-stream")
				if withID {
					flushWrite(w, "id: x-1\nretry: 1\ndata:\n\n") // resumable, but GET answers 405
				}
				flushWrite(w, "data: "+`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`+"\n\n")
				return true
			}
			c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP})
			initialize(t, c, r)
			send(t, c, `{"jsonrpc":"2.0","id":"q","method":"tools/call"}`)
			got := r.waitLine(`"id":"q"`, `"error"`)
			if !strings.Contains(got, "upstream closed the stream before replying") || !strings.Contains(got, "-32000") {
				t.Errorf("reply %s", got)
			}
		})
	}
}

// TestReplyOnGETBeforePOSTReturns: the server answers a request on the
// standalone stream and holds the POST open until the reply was delivered;
// the Client's delivery must not wait for the POST.
func TestReplyOnGETBeforePOSTReturns(t *testing.T) {
	f := newFake(t)
	// The POST handler hands the reply to the GET handler, which writes it on
	// its own stream: a ResponseWriter is only written by its own handler.
	replies := make(chan []byte)
	written := make(chan struct{})
	var r *recorder
	f.get = func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		flushWrite(w, ": open\n\n")
		select {
		case reply := <-replies:
			flushWrite(w, "data: "+string(reply)+"\n\n")
			close(written)
		case <-req.Context().Done():
			return
		}
		<-req.Context().Done()
	}
	f.request = func(w http.ResponseWriter, req *http.Request, method string, id []byte) bool {
		replies <- jsonrpc.Response(id, []byte(`{"via":"get"}`))
		<-written
		r.waitLine(`"via":"get"`) // the POST stays open until the reply was delivered
		w.Header().Set("Content-Type", "text/event-stream")
		flushWrite(w, ": nothing here\n\n")
		return true
	}
	c, rec := start(t, Config{URL: f.run(), Transport: TransportHTTP})
	r = rec
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":9,"method":"tools/call"}`)
	r.waitLine(`"id":9`, `"via":"get"`)
	c.Close()
	if got := r.lines(`"id":9`); len(got) != 1 {
		t.Errorf("replies for id 9: %q", got)
	}
}

// TestSessionExpiryReinitializes: after the server forgets the session, the
// next request gets 404; the Client replays the initialize it forwarded
// (its reply not delivered) and notifications/initialized, then retries.
func TestSessionExpiryReinitializes(t *testing.T) {
	f := newFake(t)
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP})
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	r.waitLine(`"id":2`)
	f.expire()
	send(t, c, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if got := r.waitLine(`"id":3`); !strings.Contains(got, `"result"`) {
		t.Fatalf("reply after expiry: %s", got)
	}
	c.Close()
	if n := len(r.lines("protocolVersion")); n != 1 {
		t.Errorf("%d initialize replies delivered, want only the owner's:\n%s", n, dump(r.snapshot()))
	}
	var order []string
	for _, s := range f.seen() {
		if s.method == http.MethodPost {
			order = append(order, s.rpc+"@"+s.header.Get("Mcp-Session-Id"))
		}
	}
	want := "initialize@,notifications/initialized@sess-1,tools/list@sess-1,tools/list@sess-1," +
		"initialize@,notifications/initialized@sess-2,tools/list@sess-2"
	if got := strings.Join(order, ","); got != want {
		t.Errorf("POSTs:\n got %s\nwant %s", got, want)
	}
	for _, s := range f.seen() {
		if s.rpc == "initialize" && !strings.Contains(s.body, `"clientInfo":{"name":"t"`) {
			t.Errorf("replayed initialize lost the params: %s", s.body)
		}
	}
}

// TestHTTPErrorStatusAnswersRequest: an error status becomes a JSON-RPC
// error for the request, naming the status.
func TestHTTPErrorStatusAnswersRequest(t *testing.T) {
	f := newFake(t)
	f.request = func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool {
		http.Error(w, "boom", http.StatusBadGateway)
		return true
	}
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP})
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	if got := r.waitLine(`"id":4`); !strings.Contains(got, "502") || !strings.Contains(got, "-32000") {
		t.Errorf("reply %s", got)
	}
}

// TestHTTPErrorWithJSONRPCErrorIsTheAnswer: a 4xx whose body is a JSON-RPC
// error for the request (a server answering -32601 with 404) is the
// server's answer, delivered as it is: not an expired session (no new
// initialize), not a bare status.
func TestHTTPErrorWithJSONRPCErrorIsTheAnswer(t *testing.T) {
	f := newFake(t)
	f.request = func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool {
		if method != "nope/nope" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, id)
		return true
	}
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP})
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":5,"method":"nope/nope"}`)
	if got := r.waitLine(`"id":5`); !strings.Contains(got, `"code":-32601`) || !strings.Contains(got, "Method not found") {
		t.Errorf("reply %s", got)
	}
	c.Close()
	inits := 0
	for _, s := range f.seen() {
		if s.rpc == "initialize" {
			inits++
		}
	}
	if inits != 1 {
		t.Errorf("%d initializes, want 1 (the 404 was an answer, not an expired session)", inits)
	}
}

// TestNotificationWaitsForAccept: a request sent after a notification
// reaches the server only once the notification was accepted.
func TestNotificationWaitsForAccept(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	f.notify = func(method string) {
		mu.Lock()
		order = append(order, method+" start")
		mu.Unlock()
		<-release
		mu.Lock()
		order = append(order, method+" end")
		mu.Unlock()
	}
	f.request = func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool {
		mu.Lock()
		order = append(order, method)
		mu.Unlock()
		return false
	}
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP})
	send(t, c, initReq)
	r.waitLine(`"id":1`)
	send(t, c, inited)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	close(release)
	r.waitLine(`"id":2`)
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(order, ", "); got != "notifications/initialized start, notifications/initialized end, tools/list" {
		t.Errorf("order at the server: %s", got)
	}
}

// TestOversized: a JSON body and an SSE event over MaxMessageBytes reach
// Oversized with their beginning, and the request gets an error reply.
func TestOversized(t *testing.T) {
	big := strings.Repeat("x", 3000)
	f := newFake(t)
	f.request = func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool {
		reply := string(jsonrpc.Response(id, fmt.Appendf(nil, `{"big":%q}`, big)))
		if method == "json" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(reply))
			return true
		}
		w.Header().Set("Content-Type", "text/event-stream")
		flushWrite(w, "data: "+reply+"\n\n")
		return true
	}
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP, MaxMessageBytes: 2048})
	initialize(t, c, r)
	send(t, c, `{"jsonrpc":"2.0","id":10,"method":"json"}`)
	send(t, c, `{"jsonrpc":"2.0","id":11,"method":"sse"}`)
	for _, id := range []string{"10", "11"} {
		if got := r.waitLine(`"id":`+id, `"error"`); !strings.Contains(got, "size limit") {
			t.Errorf("reply %s", got)
		}
	}
	var prefixes []string
	for _, e := range r.snapshot() {
		if e.kind == "oversized" {
			if e.size <= 2048 || len(e.data) > OversizedPrefixLen {
				t.Errorf("oversized: size %d, prefix %d bytes", e.size, len(e.data))
			}
			prefixes = append(prefixes, e.data)
		}
	}
	all := strings.Join(prefixes, "|")
	if len(prefixes) != 2 || !strings.Contains(all, `"id":10`) || !strings.Contains(all, `"id":11`) {
		t.Errorf("oversized prefixes: %.80q", prefixes)
	}
}

// TestTLSVerifiedByDefault: the default client refuses a certificate it
// cannot verify; the same server works with a client that trusts it.
func TestTLSVerifiedByDefault(t *testing.T) {
	f := newFake(t)
	f.ts = httptest.NewUnstartedServer(f.ts.Config.Handler)
	f.ts.StartTLS()
	t.Cleanup(f.ts.Close)
	url := f.ts.URL + "/mcp"

	c, r := start(t, Config{URL: url, Transport: TransportHTTP})
	send(t, c, initReq)
	if got := r.waitLine(`"id":1`, `"error"`); !strings.Contains(got, "certificate") {
		t.Errorf("reply %s", got)
	}

	c2, r2 := start(t, Config{URL: url, Transport: TransportHTTP, HTTPClient: f.ts.Client()})
	initialize(t, c2, r2)
}
