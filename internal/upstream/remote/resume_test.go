package remote

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/echoserver"
)

// sessions records what OnSession is told.
type sessions struct {
	mu  sync.Mutex
	got []Session
}

func (s *sessions) add(x Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, x)
}

func (s *sessions) all() []Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Session(nil), s.got...)
}

// initParams is the params of initReq, as OnSession reports them.
const initParams = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`

// holdGET makes the fake server hold GET streams open until the client
// leaves, counting them in opened.
func holdGET(f *fakeServer, opened chan<- string) {
	f.get = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		opened <- r.Header.Get("Mcp-Session-Id") + "@" + r.Header.Get("Mcp-Protocol-Version")
		<-r.Context().Done()
	}
}

// TestResumeCarriesOnWithSession: a Client tells OnSession its session
// before the initialize answer reaches its Handler; a second Client
// resumed on that session opens its GET stream, sends requests with the
// session's id and version and no initialize, and leaves the session at
// the server when it closes (KeepSession), while the first still DELETEs.
func TestResumeCarriesOnWithSession(t *testing.T) {
	f := newFake(t)
	opened := make(chan string, 4)
	holdGET(f, opened)
	url := f.run()
	var told sessions
	var a *Client
	var ra *recorder
	a, ra = start(t, Config{URL: url, Transport: TransportHTTP, OnSession: func(s Session) {
		if n := len(ra.lines("protocolVersion")); n != 0 {
			t.Errorf("OnSession came after the initialize answer reached the Handler")
		}
		told.add(s)
	}})
	initialize(t, a, ra)
	if got := <-opened; got != "sess-1@2025-06-18" {
		t.Errorf("the first Client's GET stream: %s", got)
	}
	got := told.all()
	if len(got) != 1 || got[0].ID != "sess-1" || got[0].Version != "2025-06-18" || string(got[0].Init) != initParams {
		t.Fatalf("OnSession was told %+v", got)
	}

	b, rb := start(t, Config{URL: url, Transport: TransportHTTP, Resume: &got[0], KeepSession: true,
		OnSession: func(s Session) { t.Errorf("a resumed session announced again: %+v", s) }})
	b.HoldStream(true) // the client's standalone stream is served through b
	if got := <-opened; got != "sess-1@2025-06-18" {
		t.Errorf("the resumed Client's GET stream: %s", got)
	}
	send(t, b, `{"jsonrpc":"2.0","id":"b1","method":"tools/call"}`)
	if got := rb.waitLine(`"id":"b1"`); !strings.Contains(got, `"result":{"method":"tools/call"}`) {
		t.Errorf("reply through the resumed session: %s", got)
	}
	b.Close()
	a.Close()
	var inits, deletes int
	for _, s := range f.seen() {
		switch {
		case s.rpc == "initialize":
			inits++
		case s.method == http.MethodDelete:
			deletes++
		case s.rpc == "tools/call":
			if sid, v := s.header.Get("Mcp-Session-Id"), s.header.Get("Mcp-Protocol-Version"); sid != "sess-1" || v != "2025-06-18" {
				t.Errorf("the resumed request carried session %q, version %q", sid, v)
			}
		}
	}
	if inits != 1 || deletes != 1 {
		t.Errorf("the server saw %d initialize and %d DELETE, want 1 each (the resumed Client keeps the session)", inits, deletes)
	}
}

// TestResumeRenewsForgottenSession: a resumed session the server forgot
// (404) is renewed with the initialize it was resumed with, as a Client
// renews its own, and OnSession is told the new session.
func TestResumeRenewsForgottenSession(t *testing.T) {
	f := newFake(t)
	url := f.run()
	var told sessions
	c, r := start(t, Config{URL: url, Transport: TransportHTTP, OnSession: told.add,
		Resume: &Session{ID: "sess-0", Version: "2025-06-18", Init: []byte(initParams)}})
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := r.waitLine(`"id":2`); !strings.Contains(got, `"result"`) {
		t.Fatalf("reply after the renewal: %s", got)
	}
	got := told.all()
	if len(got) != 1 || got[0].ID != "sess-1" || got[0].Version != "2025-06-18" || string(got[0].Init) != initParams {
		t.Errorf("OnSession was told %+v, want the renewed sess-1", got)
	}
	if n := len(r.lines("protocolVersion")); n != 0 {
		t.Errorf("the renewal's initialize answer reached the Handler")
	}
	var order []string
	for _, s := range f.seen() {
		if s.method == http.MethodPost {
			order = append(order, s.rpc+"@"+s.header.Get("Mcp-Session-Id"))
			if s.rpc == "initialize" && !strings.Contains(s.body, `"params":`+initParams) {
				t.Errorf("the renewal's initialize: %s", s.body)
			}
		}
	}
	want := "tools/list@sess-0,initialize@,notifications/initialized@sess-1,tools/list@sess-1"
	if got := strings.Join(order, ","); got != want {
		t.Errorf("POSTs:\n got %s\nwant %s", got, want)
	}
}

// TestResumeWithoutInitFails: a resumed session that cannot be renewed
// (no initialize to replay) fails its request as an expired session
// whose renewal failed does, and announces nothing.
func TestResumeWithoutInitFails(t *testing.T) {
	f := newFake(t)
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP,
		OnSession: func(s Session) { t.Errorf("announced %+v", s) },
		Resume:    &Session{ID: "gone", Version: "2025-06-18"}})
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := r.waitLine(`"id":2`); !strings.Contains(got, "upstream session expired and could not be renewed") {
		t.Errorf("reply: %s", got)
	}
}

// TestResumeConfigValidation: a session to resume needs Streamable HTTP,
// and an id and version fit for headers.
func TestResumeConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{URL: "http://h/", Resume: &Session{ID: "a", Version: "2025-06-18"}}, // auto
		{URL: "http://h/", Transport: TransportSSE, Resume: &Session{ID: "a", Version: "2025-06-18"}},
		{URL: "http://h/", Transport: TransportHTTP, Resume: &Session{ID: "a b", Version: "2025-06-18"}},
		{URL: "http://h/", Transport: TransportHTTP, Resume: &Session{ID: "a\r\nX: y", Version: "2025-06-18"}},
		{URL: "http://h/", Transport: TransportHTTP, Resume: &Session{ID: "a"}},
	} {
		if _, err := Start(cfg, newRecorder(t)); err == nil || !strings.Contains(err.Error(), "Resume") {
			t.Errorf("Start(%+v) = %v", *cfg.Resume, err)
		}
	}
}

// TestResumedStreamWaitsForTheOtherHolder: the remote allows one
// standalone stream per session (409 for a second, as the TypeScript SDK
// does) and the replica the session was resumed from holds it: the
// resumed Client, told to hold it, retries until that replica lets go,
// then holds it.
func TestResumedStreamWaitsForTheOtherHolder(t *testing.T) {
	f := newFake(t)
	var mu sync.Mutex
	held := false
	refused := make(chan struct{}, 100)
	opened := make(chan struct{}, 2)
	f.get = func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		busy := held
		held = true
		mu.Unlock()
		if busy {
			http.Error(w, "Conflict: Only one SSE stream is allowed per session", http.StatusConflict)
			refused <- struct{}{}
			return
		}
		defer func() {
			mu.Lock()
			held = false
			mu.Unlock()
		}()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		opened <- struct{}{}
		<-r.Context().Done()
	}
	url := f.run()
	await := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(waitTimeout):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	a, ra := start(t, Config{URL: url, Transport: TransportHTTP, KeepSession: true})
	initialize(t, a, ra)
	await(opened, "the first Client's stream")
	b, _ := start(t, Config{URL: url, Transport: TransportHTTP, Resume: &Session{ID: "sess-1", Version: "2025-06-18"}})
	b.HoldStream(true)
	await(refused, "the resumed Client's stream to be refused")
	a.Close() // the first replica ends its connection, keeping the session
	await(opened, "the resumed Client's stream")
}

// replies is a Handler that passes each message the Client reads to a
// channel, for tests and benchmarks that wait on one reply at a time.
type replies chan []byte

func (r replies) Started(uint64)                {}
func (r replies) Line(_ uint64, msg []byte)     { r <- bytes.Clone(msg) }
func (r replies) Oversized(uint64, []byte, int) {}
func (r replies) Exited(uint64, error)          {}
func (r replies) await(tb testing.TB, id string) { // the reply to request id
	tb.Helper()
	for msg := range r {
		if bytes.Contains(msg, []byte(`"id":`+id+`,`)) {
			return
		}
	}
}

// echoPair starts the repository's echo server over Streamable HTTP,
// counting the connections made to it, and two Clients of one upstream
// session there: the one that initialized it and one resumed on it (as
// another replica of the gateway holds it).
func echoPair(tb testing.TB) (initialized, resumed *Client, ri, rr replies, conns *atomic.Int64) {
	tb.Helper()
	echo := echoserver.NewHandler()
	ts := httptest.NewUnstartedServer(echo)
	conns = new(atomic.Int64)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	tb.Cleanup(func() {
		echo.Close()
		ts.Close()
	})
	var told atomic.Pointer[Session]
	ri, rr = make(replies, 16), make(replies, 16)
	start := func(cfg Config, h replies) *Client {
		cfg.URL, cfg.Transport, cfg.Logger = ts.URL+"/mcp", TransportHTTP, slog.New(slog.DiscardHandler)
		c, err := Start(cfg, h)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		return c
	}
	initialized = start(Config{OnSession: func(s Session) { told.Store(&s) }}, ri)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	} {
		if err := initialized.Send(context.Background(), []byte(msg)); err != nil {
			tb.Fatal(err)
		}
	}
	ri.await(tb, "0")
	<-initialized.Delivered()
	resumed = start(Config{Resume: told.Load(), KeepSession: true}, rr)
	return initialized, resumed, ri, rr, conns
}

// echoCallN sends echo call n through c and waits for its reply.
func echoCallN(tb testing.TB, c *Client, r replies, n int) {
	tb.Helper()
	id := strconv.Itoa(n)
	if err := c.Send(context.Background(), []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`)); err != nil {
		tb.Fatal(err)
	}
	r.await(tb, id)
}

// TestResumedClientReusesConnection: a Client resumed on another's
// upstream session sends its calls over one kept-alive connection, as the
// Client that initialized the session does: a replica serving a session it
// resumed dials no more than the owner (one connection for the POSTs, one
// for the standalone GET stream).
func TestResumedClientReusesConnection(t *testing.T) {
	initialized, resumed, ri, rr, conns := echoPair(t)
	const calls = 50
	for _, tc := range []struct {
		name string
		c    *Client
		r    replies
	}{{"initialized", initialized, ri}, {"resumed", resumed, rr}} {
		before := conns.Load()
		for n := range calls {
			echoCallN(t, tc.c, tc.r, n+1)
		}
		// The resumed Client's GET may open during its calls.
		if opened := conns.Load() - before; opened > 2 {
			t.Errorf("the %s Client opened %d connections for %d calls, want its POSTs on one", tc.name, opened, calls)
		}
	}
}

// BenchmarkResumedClientCall: one echo call through the Client that
// initialized its upstream session, and through one resumed on it (the
// baseline and what a replica serving a resumed session pays): the same
// time and allocations per call (-benchmem).
func BenchmarkResumedClientCall(b *testing.B) {
	initialized, resumed, ri, rr, _ := echoPair(b)
	for _, bc := range []struct {
		name string
		c    *Client
		r    replies
	}{{"initialized", initialized, ri}, {"resumed", resumed, rr}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				echoCallN(b, bc.c, bc.r, n)
			}
		})
	}
}
