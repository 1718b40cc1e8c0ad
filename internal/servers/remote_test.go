package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// statelessRemote is an httptest server standing for a remote MCP server:
// it answers server/discover with discover (after gate, if set), tools/call
// of "echo" at once and of "hang" never (until the client leaves).
type statelessRemote struct {
	ts       *httptest.Server
	discover func(w http.ResponseWriter, id string)
	gate     chan struct{} // nil: discover answers at once

	probes atomic.Int32  // server/discover POSTs
	hung   chan struct{} // gets a value when a "hang" call arrived
	gone   chan struct{} // gets a value when a "hang" call's request ended

	mu     sync.Mutex
	bodies []string // of the requests answered at once
}

const remoteMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func modernDiscover(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}}`)
}

func newStatelessRemote(t *testing.T, discover func(w http.ResponseWriter, id string)) *statelessRemote {
	r := &statelessRemote{discover: discover, hung: make(chan struct{}, 10), gone: make(chan struct{}, 10)}
	r.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		id := string(m.Bytes(m.ID))
		switch {
		case m.MethodIs("server/discover"):
			r.probes.Add(1)
			if r.gate != nil {
				<-r.gate
			}
			r.discover(w, id)
		case req.Header.Get("Mcp-Name") == "hang":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			r.hung <- struct{}{}
			<-req.Context().Done()
			r.gone <- struct{}{}
		default:
			r.mu.Lock()
			r.bodies = append(r.bodies, string(body))
			r.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+id+",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"echo\"}]}}\n\n")
		}
	}))
	t.Cleanup(r.ts.Close)
	return r
}

// newRemoteServer is a Server for the remote at url.
func newRemoteServer(t *testing.T, url string, protocol ...string) *remoteServer {
	t.Helper()
	cfg := testServer("remote")
	cfg.Type, cfg.URL = config.TypeHTTP, url
	if len(protocol) > 0 {
		cfg.Protocol = protocol[0]
	}
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.(*remoteServer)
}

// recording is a mux.Stream that keeps everything.
type recording struct {
	mu      sync.Mutex
	sent    []string
	replies []string
	got     chan struct{}
}

func newRecording() *recording { return &recording{got: make(chan struct{}, 10)} }

func (r *recording) Send(msg []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, string(msg))
}

func (r *recording) Reply(msg []byte) {
	r.mu.Lock()
	if msg == nil {
		r.replies = append(r.replies, "<cancelled>")
	} else {
		r.replies = append(r.replies, string(msg))
	}
	r.mu.Unlock()
	r.got <- struct{}{}
}

// reply waits for the one reply.
func (r *recording) reply(t *testing.T) string {
	t.Helper()
	select {
	case <-r.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no reply within 30s")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.replies) != 1 {
		t.Fatalf("%d replies: %q", len(r.replies), r.replies)
	}
	return r.replies[0]
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func toolCall(id, name string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":{},` + remoteMeta + `}}`
}

// TestRemoteStatelessProbeOnce: concurrent first requests share one probe,
// and the verdict stands: later requests do not probe again.
func TestRemoteStatelessProbeOnce(t *testing.T) {
	remote := newStatelessRemote(t, modernDiscover)
	remote.gate = make(chan struct{})
	s := newRemoteServer(t, remote.ts.URL+"/mcp")
	const callers = 8
	var wg sync.WaitGroup
	conns := make(chan conn.StatelessConn, callers)
	for range callers {
		wg.Go(func() {
			c, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
			if err != nil {
				t.Errorf("OpenStateless: %v", err)
				return
			}
			conns <- c
		})
	}
	// Callers that come while the probe is held wait for it; any later
	// find its verdict: either way, one probe.
	testkit.WaitFor(t, "the probe", func() bool { return remote.probes.Load() == 1 })
	close(remote.gate)
	wg.Wait()
	close(conns)
	for c := range conns {
		if !c.Passthrough() || c.Version() != "2026-07-28" {
			t.Errorf("conn: passthrough %v, version %q", c.Passthrough(), c.Version())
		}
		if init, err := c.ServerInit(context.Background()); err != nil || !strings.Contains(string(init), `"supportedVersions":["2026-07-28"]`) {
			t.Errorf("ServerInit = %s, %v", init, err)
		}
		c.Close()
	}
	c, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := remote.probes.Load(); n != 1 {
		t.Errorf("%d probes, want 1", n)
	}
}

// TestRemoteStatelessRequests: a request goes up as it came and its answer
// comes back; Abandon and Close cancel requests upstream (closing their
// POSTs), Close answering them.
func TestRemoteStatelessRequests(t *testing.T) {
	remote := newStatelessRemote(t, modernDiscover)
	s := newRemoteServer(t, remote.ts.URL+"/mcp")
	c, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	out := newRecording()
	handleMsg(t, c, toolCall(`"c-1"`, "echo"), out)
	if got := out.reply(t); got != `{"jsonrpc":"2.0","id":"c-1","result":{"content":[{"type":"text","text":"echo"}]}}` {
		t.Errorf("reply %s", got)
	}
	if len(out.sent) != 1 || !strings.Contains(out.sent[0], "notifications/progress") {
		t.Errorf("sent %q, want the progress notification", out.sent)
	}

	// Abandon: cancelled upstream, no reply.
	out = newRecording()
	handleMsg(t, c, toolCall("2", "hang"), out)
	wait(t, remote.hung, "the request at the remote")
	c.Abandon(out)
	wait(t, remote.gone, "the remote's request to end")
	testkit.WaitFor(t, "the request to finish", func() bool { return s.Pending() == 0 })
	out.mu.Lock()
	if len(out.replies) != 0 {
		t.Errorf("an abandoned request got replies %q", out.replies)
	}
	out.mu.Unlock()

	// Close: answered with an error at once, and cancelled upstream.
	out = newRecording()
	handleMsg(t, c, toolCall("3", "hang"), out)
	wait(t, remote.hung, "the request at the remote")
	if s.Pending() != 1 {
		t.Errorf("Pending = %d, want 1", s.Pending())
	}
	c.CloseWith("the request ended")
	if got := out.reply(t); got != `{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"mcpgate: the request ended"}}` {
		t.Errorf("reply %s", got)
	}
	wait(t, remote.gone, "the remote's request to end")
	// A closed connection refuses more.
	out = newRecording()
	handleMsg(t, c, toolCall("4", "echo"), out)
	if got := out.reply(t); !strings.Contains(got, `"id":4,"error"`) {
		t.Errorf("reply after Close: %s", got)
	}
}

// TestRemoteStatelessCloseServer: closing the Server answers the requests
// in flight and ends them upstream.
func TestRemoteStatelessCloseServer(t *testing.T) {
	remote := newStatelessRemote(t, modernDiscover)
	s := newRemoteServer(t, remote.ts.URL+"/mcp")
	c, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	out := newRecording()
	handleMsg(t, c, toolCall("1", "hang"), out)
	wait(t, remote.hung, "the request at the remote")
	s.Close()
	if got := out.reply(t); !strings.Contains(got, `"id":1,"error":{"code":-32000,"message":"mcpgate: server is shutting down"`) {
		t.Errorf("reply %s", got)
	}
	wait(t, remote.gone, "the remote's request to end")
	if _, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}")); !errors.Is(err, errClosed) {
		t.Errorf("OpenStateless after Close: %v", err)
	}
}

// TestRemoteStatelessNotModern: a remote of the session eras pinned to
// 2026-07-28 (a misconfiguration) gets its stateless requests refused the
// way a session-era server tells a client to initialize, after one probe.
func TestRemoteStatelessNotModern(t *testing.T) {
	remote := newStatelessRemote(t, func(w http.ResponseWriter, id string) {
		http.Error(w, "Bad Request: missing session ID", http.StatusBadRequest)
	})
	s := newRemoteServer(t, remote.ts.URL+"/mcp", config.ProtocolModern)
	for i := range 3 {
		c, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if !c.Passthrough() {
			t.Error("the refusal must reach the client as it is")
		}
		out := newRecording()
		handleMsg(t, c, `{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{`+remoteMeta+`}}`, out)
		got := out.reply(t)
		if !strings.Contains(got, `"id":9,"error":{"code":-32022,"message":"mcpgate: remote server remote does not speak protocol version 2026-07-28; initialize a session"`) ||
			!strings.Contains(got, `"data":{"supported":["2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"requested":"2026-07-28"}}}`) {
			t.Errorf("reply %d: %s", i, got)
		}
		c.Close()
	}
	if n := remote.probes.Load(); n != 1 {
		t.Errorf("%d probes, want 1", n)
	}
}

// TestRemoteStatelessTranslated: a remote of the session eras (it refuses
// a POST without a session, as most do) gets its stateless requests
// translated through one upstream session the gateway initializes, shared
// by them all; closing the Server ends it.
func TestRemoteStatelessTranslated(t *testing.T) {
	echo := echoserver.NewHandler()
	t.Cleanup(echo.Close)
	var sessions atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			body, _ := io.ReadAll(r.Body)
			if !strings.Contains(string(body), `"initialize"`) {
				http.Error(w, "Bad Request: missing session ID", http.StatusBadRequest)
				return
			}
			sessions.Add(1)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		echo.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s := newRemoteServer(t, ts.URL+"/mcp")
	for i := range 3 {
		c, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if c.Passthrough() {
			t.Fatal("a session-era remote's requests passed through")
		}
		out := newRecording()
		handleMsg(t, c, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m%d"}}}`, i, i), out)
		if got := out.reply(t); !strings.Contains(got, fmt.Sprintf(`"id":%d,`, i)) || !strings.Contains(got, fmt.Sprintf(`"text":"m%d"`, i)) {
			t.Errorf("reply %d: %s", i, got)
		}
		c.Close()
	}
	if n := sessions.Load(); n != 1 {
		t.Errorf("%d upstream sessions for three translated requests, want 1", n)
	}
	s.Close()
	testkit.WaitFor(t, "the translation session ended", func() bool { return echo.Sessions() == 0 })
}

// TestRemoteStatelessProbeFails: a probe that fails without a verdict
// fails its requests, and the next probe waits for the backoff.
func TestRemoteStatelessProbeFails(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	remote := newStatelessRemote(t, func(w http.ResponseWriter, id string) {
		if fail.Load() {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		modernDiscover(w, id)
	})
	s := newRemoteServer(t, remote.ts.URL+"/mcp")
	for range 2 {
		if _, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}")); err == nil || !strings.Contains(err.Error(), "503") {
			t.Fatalf("OpenStateless with a failing probe: %v", err)
		}
	}
	if n := remote.probes.Load(); n != 1 {
		t.Errorf("%d probes within the backoff, want 1", n)
	}
	fail.Store(false)
	s.mu.Lock()
	s.retryAt = time.Now() // the backoff is over
	s.mu.Unlock()
	c, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
	if err != nil {
		t.Fatalf("OpenStateless after the backoff: %v", err)
	}
	c.Close()
	if n := remote.probes.Load(); n != 2 {
		t.Errorf("%d probes, want 2", n)
	}
}

// TestRemoteSSEHasNoStatelessPath: a legacy SSE remote is never probed:
// the HTTP front refuses its stateless requests itself.
func TestRemoteSSEHasNoStatelessPath(t *testing.T) {
	cfg := testServer("legacy")
	cfg.Type, cfg.URL = config.TypeSSE, "http://127.0.0.1:1/sse"
	s, err := New(cfg, "test", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ServesStateless() {
		t.Error("an sse remote serves stateless requests")
	}
}

func handleMsg(t *testing.T, c conn.Conn, raw string, out *recording) {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	c.Handle(context.Background(), &m, out)
}

// TestRemoteStatelessReplyKeepsConnection: a request answered on an SSE
// stream leaves its connection to the remote open for the next request:
// after the reply the stream is read on to its end, not cut. The remote
// here ends each stream only once the reply reached the client, as a
// server whose end comes in a later packet than its reply. (The call
// table ends a call's context, its Cancel, before its answer goes out;
// that must not close a POST whose reply has come.)
func TestRemoteStatelessReplyKeepsConnection(t *testing.T) {
	delivered := make(chan struct{}, 1)
	var dialed atomic.Int32
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		id := string(m.Bytes(m.ID))
		if m.MethodIs("server/discover") {
			modernDiscover(w, id)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+id+",\"result\":{}}\n\n")
		w.(http.Flusher).Flush()
		select { // the stream ends once the client has the reply
		case <-delivered:
		case <-req.Context().Done():
		}
	}))
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dialed.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	s := newRemoteServer(t, ts.URL+"/mcp")
	c, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const calls = 5
	for i := range calls {
		out := newRecording()
		m, err := jsonrpc.Parse([]byte(toolCall(fmt.Sprint(i), "echo")))
		if err != nil {
			t.Fatal(err)
		}
		c.Handle(context.Background(), &m, releasing{out, delivered})
		if got := out.reply(t); got != `{"jsonrpc":"2.0","id":`+fmt.Sprint(i)+`,"result":{}}` {
			t.Fatalf("reply %s", got)
		}
		// The request's goroutine ends once the stream's end was read.
		testkit.WaitFor(t, "the request to finish", func() bool { return s.Pending() == 0 })
	}
	if n := dialed.Load(); n != 1 {
		t.Errorf("%d connections to the remote for its probe and %d calls, want 1 (reused)", n, calls)
	}
}

// releasing is a recording that, given the final answer, lets the remote
// end the request's stream.
type releasing struct {
	*recording
	release chan<- struct{}
}

func (r releasing) Reply(msg []byte) {
	r.recording.Reply(msg)
	select {
	case r.release <- struct{}{}:
	default: // the stream ended already (it was cut)
	}
}
