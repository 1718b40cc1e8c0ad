package servers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// handoffSink records what a handoff sink is given, as the front's would.
type handoffSink struct {
	mu     sync.Mutex
	states [][]byte
	apply  func([]byte) // what the connection registered (conn.WithStateUpdates)
}

func (s *handoffSink) put(state []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, bytes.Clone(state))
}

func (s *handoffSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.states)
}

// last returns the newest state, decoded, and its bytes.
func (s *handoffSink) last(t *testing.T) (handoffState, []byte) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.states) == 0 {
		t.Fatal("the sink got no state")
	}
	b := s.states[len(s.states)-1]
	h, err := decodeHandoff(b)
	if err != nil {
		t.Fatalf("the sink's state: %v", err)
	}
	return h, b
}

func (s *handoffSink) ctx() context.Context {
	return conn.WithStateUpdates(conn.WithHandoff(context.Background(), s.put), func(apply func([]byte)) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.apply = apply
	})
}

// sinkAtReply is a recording that notes how many states its sink had when
// the reply came: the state of an initialized session must be handed off
// before the client learns of the session.
type sinkAtReply struct {
	*recording
	sink *handoffSink
	had  atomic.Int32
}

func (r *sinkAtReply) Reply(msg []byte) {
	r.had.Store(int32(r.sink.count()))
	r.recording.Reply(msg)
}

// echoRemote is the repository's echo server over Streamable HTTP, with
// the initialize POSTs it got counted and kept.
type echoRemote struct {
	echo  *echoserver.Handler
	ts    *httptest.Server
	mu    sync.Mutex
	inits []string
	ids   []string // the ids of every request, in arrival order
	// inited counts the notifications/initialized answered.
	inited atomic.Int32
}

func newEchoRemote(t *testing.T) *echoRemote {
	r := &echoRemote{echo: echoserver.NewHandler()}
	t.Cleanup(r.echo.Close)
	r.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var inited bool
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			if m, err := jsonrpc.Parse(body); err == nil && m.Kind == jsonrpc.KindRequest {
				r.mu.Lock()
				r.ids = append(r.ids, string(m.Bytes(m.ID)))
				if m.MethodIs("initialize") {
					r.inits = append(r.inits, string(body))
				}
				r.mu.Unlock()
			}
			inited = bytes.Contains(body, []byte(`"notifications/initialized"`))
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		r.echo.ServeHTTP(w, req)
		if inited {
			r.inited.Add(1)
		}
	}))
	t.Cleanup(r.ts.Close)
	return r
}

func (r *echoRemote) initializes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.inits...)
}

// forget ends upstream session id at the remote, as a restarted remote
// would have.
func (r *echoRemote) forget(t *testing.T, id string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, r.ts.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE of the upstream session: %s", resp.Status)
	}
}

const (
	portableInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"c","version":"1"}}}`
	initedNote   = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

func echoCall(id, text string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + text + `"}}}`
}

// openPortable opens a session on replica s with a handoff sink and
// initializes it, checking what the sink got on the way.
func openPortable(t *testing.T, s *remoteServer, sink *handoffSink) conn.Conn {
	t.Helper()
	c, err := s.Open(sink.ctx(), newRecording())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if h, _ := sink.last(t); sink.count() != 1 || h.initialized() {
		t.Fatalf("before Open returned the sink got %d states, the last %+v; want one, not initialized", sink.count(), h)
	}
	out := &sinkAtReply{recording: newRecording(), sink: sink}
	c.Handle(context.Background(), parsed(t, portableInit), out)
	if got := out.reply(t); !strings.Contains(got, `"protocolVersion":"2025-06-18"`) {
		t.Fatalf("initialize: %s", got)
	}
	if n := out.had.Load(); n < 2 {
		t.Fatalf("the sink had %d states when the initialize answer came, want the initialized session's too", n)
	}
	handleMsg(t, c, initedNote, newRecording())
	return c
}

// resumeOn resumes a session of version 2025-06-18 on replica s from
// state, with a handoff sink.
func resumeOn(t *testing.T, s *remoteServer, sink *handoffSink, state []byte) conn.Conn {
	t.Helper()
	c, err := s.Resume(sink.ctx(), newRecording(), state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if v := c.Version(); v != "2025-06-18" {
		t.Errorf("the resumed session's version is %q", v)
	}
	return c
}

func parsed(t *testing.T, raw string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return &m
}

// TestRemoteSessionResumedOnAnotherReplica: a session opened on one
// replica hands its upstream session to the sink; a second replica (a
// second Server value) resumes it from the sink's last state and serves
// its tools/call, with no initialize of its own: the remote saw exactly
// one. The first replica ending its connection leaves the upstream session
// to the second.
func TestRemoteSessionResumedOnAnotherReplica(t *testing.T) {
	remote := newEchoRemote(t)
	url := remote.ts.URL + "/mcp"
	a, b := newRemoteServer(t, url), newRemoteServer(t, url)
	var sinkA, sinkB handoffSink
	ca := openPortable(t, a, &sinkA)
	h, state := sinkA.last(t)
	if h.kind != kindUpstream || h.session == "" || h.version != "2025-06-18" ||
		string(h.caps) != `{"sampling":{}}` || string(h.info) != `{"name":"c","version":"1"}` {
		t.Fatalf("the initialized session's state: %+v", h)
	}

	cb := resumeOn(t, b, &sinkB, state)
	// Replica A stops: Close waits for its connections' upstreams to end.
	ca.CloseWith("the gateway is shutting down")
	a.Close()
	out := newRecording()
	handleMsg(t, cb, echoCall(`"b-1"`, "on b"), out)
	if got := out.reply(t); !strings.Contains(got, `"id":"b-1","result"`) || !strings.Contains(got, `on b`) {
		t.Errorf("tools/call on the resumed session: %s", got)
	}
	if n := len(remote.initializes()); n != 1 {
		t.Errorf("the remote saw %d initialize, want 1", n)
	}
	if n := sinkB.count(); n != 0 {
		t.Errorf("the resumed session handed off %d states with nothing changed", n)
	}
	if n := remote.echo.Sessions(); n != 1 {
		t.Errorf("%d upstream sessions at the remote, want the one both replicas served", n)
	}
}

// Two replicas serving one upstream session at once never send the same
// request id in it: a server keying its reply streams by id would give one
// replica's reply to the other's request (server-everything does).
func TestRemoteReplicasRequestIDsApart(t *testing.T) {
	remote := newEchoRemote(t)
	url := remote.ts.URL + "/mcp"
	a, b := newRemoteServer(t, url), newRemoteServer(t, url)
	var sinkA, sinkB handoffSink
	ca := openPortable(t, a, &sinkA)
	_, state := sinkA.last(t)
	cb := resumeOn(t, b, &sinkB, state)
	for i, c := range []conn.Conn{ca, cb, ca, cb} {
		out := newRecording()
		handleMsg(t, c, echoCall(`1`, "m"), out)
		if got := out.reply(t); !strings.Contains(got, `"id":1,"result"`) {
			t.Errorf("call %d: %s", i, got)
		}
	}
	remote.mu.Lock()
	ids := append([]string(nil), remote.ids...)
	remote.mu.Unlock()
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("id %s sent twice in one upstream session (ids %v)", id, ids)
		}
		seen[id] = true
		if n, err := strconv.ParseUint(id, 10, 64); err != nil || n >= 1<<53 {
			t.Errorf("id %s: not an integer a JavaScript server reads exactly", id)
		}
	}
	if len(ids) != 5 {
		t.Errorf("the remote got %d requests %v, want the initialize and 4 calls", len(ids), ids)
	}
}

// TestRemoteResumedSessionForgotten: the remote forgets a resumed upstream
// session (404): the resumed replica renews it with the client's
// initialize, as the opening replica would have, and hands the new
// upstream session to its sink.
func TestRemoteResumedSessionForgotten(t *testing.T) {
	remote := newEchoRemote(t)
	url := remote.ts.URL + "/mcp"
	a, b := newRemoteServer(t, url), newRemoteServer(t, url)
	var sinkA, sinkB handoffSink
	openPortable(t, a, &sinkA)
	old, state := sinkA.last(t)
	// Replica A's notifications/initialized, sent without waiting, must
	// not meet the forgotten session: A would renew it too.
	testkit.WaitFor(t, "A's notifications/initialized", func() bool { return remote.inited.Load() == 1 })
	cb := resumeOn(t, b, &sinkB, state)
	remote.forget(t, old.session)

	out := newRecording()
	handleMsg(t, cb, echoCall("7", "after 404"), out)
	if got := out.reply(t); !strings.Contains(got, `"id":7,"result"`) || !strings.Contains(got, "after 404") {
		t.Errorf("tools/call after the remote forgot the session: %s", got)
	}
	renewed, _ := sinkB.last(t)
	if renewed.session == "" || renewed.session == old.session || renewed.version != "2025-06-18" ||
		string(renewed.caps) != `{"sampling":{}}` || string(renewed.info) != `{"name":"c","version":"1"}` {
		t.Errorf("the renewed session's state: %+v (the old session was %q)", renewed, old.session)
	}
	inits := remote.initializes()
	if len(inits) != 2 || !strings.Contains(inits[1], `"capabilities":{"sampling":{}}`) || !strings.Contains(inits[1], `"clientInfo":{"name":"c","version":"1"}`) {
		t.Errorf("initializes at the remote: %q; want the client's and the renewal with its capabilities", inits)
	}
	// The renewed session is the one requests use now.
	out = newRecording()
	handleMsg(t, cb, echoCall("8", "again"), out)
	if got := out.reply(t); !strings.Contains(got, `"id":8,"result"`) {
		t.Errorf("the next tools/call: %s", got)
	}
	if n := len(remote.initializes()); n != 2 {
		t.Errorf("%d initializes, want 2", n)
	}
}

// TestRemoteResumeBadState: a state that does not parse, or is of a kind
// the server does not serve, is refused with an error naming the server.
func TestRemoteResumeBadState(t *testing.T) {
	s := newRemoteServer(t, "http://127.0.0.1:1/mcp")
	upstream := handoffState{kind: kindUpstream, session: "s", version: "2025-06-18"}.encode()
	reverse := handoffState{kind: kindReverse, version: "2025-06-18"}.encode()
	for name, state := range map[string][]byte{
		"empty":          nil,
		"garbage":        []byte("not a state"),
		"cut short":      upstream[:len(upstream)-1],
		"later layout":   append([]byte{2}, upstream[1:]...),
		"reverse kind":   reverse,
		"header breaker": handoffState{kind: kindUpstream, session: "a\r\nX: y", version: "2025-06-18"}.encode(),
	} {
		c, err := s.Resume(context.Background(), newRecording(), state)
		if err == nil || c != nil || !errors.Is(err, errBadState) || !strings.Contains(err.Error(), `server "remote"`) {
			t.Errorf("%s: Resume = %v, %v; want an error naming the server", name, c, err)
		}
	}
	pinned := newRemoteServer(t, "http://127.0.0.1:1/mcp", config.ProtocolModern)
	if c, err := pinned.Resume(context.Background(), newRecording(), upstream); err == nil || c != nil || !errors.Is(err, errBadState) {
		t.Errorf("an upstream session on a reverse-bridge server: %v, %v", c, err)
	}
}

// TestRemoteReverseSessionResumed: a session of the reverse bridge (the
// remote is pinned to 2026-07-28, the session is gateway state only) hands
// off the client's version and capabilities as it initializes; another
// replica resumes it and sends its requests with them.
func TestRemoteReverseSessionResumed(t *testing.T) {
	remote := newStatelessRemote(t, modernDiscover)
	url := remote.ts.URL + "/mcp"
	a := newRemoteServer(t, url, config.ProtocolModern)
	b := newRemoteServer(t, url, config.ProtocolModern)
	var sinkA, sinkB handoffSink
	ca := openPortable(t, a, &sinkA)
	h, state := sinkA.last(t)
	if h.kind != kindReverse || h.session != "" || h.version != "2025-06-18" || string(h.caps) != `{"sampling":{}}` {
		t.Fatalf("the reverse session's state: %+v", h)
	}
	ca.Close()
	cb := resumeOn(t, b, &sinkB, state)
	out := newRecording()
	handleMsg(t, cb, echoCall(`"r-1"`, "x"), out)
	if got := out.reply(t); !strings.Contains(got, `"id":"r-1","result"`) || !strings.Contains(got, `"text":"echo"`) {
		t.Errorf("tools/call on the resumed reverse session: %s", got)
	}
	remote.mu.Lock()
	calls := append([]string(nil), remote.bodies...)
	remote.mu.Unlock()
	// The one request the remote answered is the resumed session's call
	// (an initialize would have been answered so too).
	if len(calls) != 1 || !strings.Contains(calls[0], `"method":"tools/call"`) ||
		!strings.Contains(calls[0], `"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}`) ||
		!strings.Contains(calls[0], `"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}`) {
		t.Errorf("the remote got %q; want one call with the session's capabilities and clientInfo", calls)
	}
}

// TestRemoteReverseLevelAndSubscriptionsResumed: a reverse-bridge
// session hands off its logging level and subscriptions as they change; a
// session resumed from that on another replica sends its requests with
// the level and asks its listen for the URIs, though neither was set
// through it.
func TestRemoteReverseLevelAndSubscriptionsResumed(t *testing.T) {
	// One remote per replica's view of it: what the second one gets is
	// the resumed session's alone.
	remoteA, remoteB := newStatelessRemote(t, subscribableDiscover), newStatelessRemote(t, subscribableDiscover)
	a := newRemoteServer(t, remoteA.ts.URL+"/mcp", config.ProtocolModern)
	b := newRemoteServer(t, remoteB.ts.URL+"/mcp", config.ProtocolModern)
	var sinkA, sinkB handoffSink
	ca := openPortable(t, a, &sinkA)
	for i, msg := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"file:///watched"}}`,
	} {
		out := newRecording()
		handleMsg(t, ca, msg, out)
		if got := out.reply(t); got != `{"jsonrpc":"2.0","id":`+strconv.Itoa(2+i)+`,"result":{}}` {
			t.Fatalf("%s: %s", msg, got)
		}
	}
	h, state := sinkA.last(t)
	if string(h.level) != `"debug"` || !slices.Equal(h.subs, []string{"file:///watched"}) || h.version != "2025-06-18" {
		t.Fatalf("the state after setLevel and subscribe: %+v", h)
	}
	ca.Close()

	cb := resumeOn(t, b, &sinkB, state)
	out := newRecording()
	handleMsg(t, cb, echoCall(`"r-1"`, "x"), out)
	if got := out.reply(t); !strings.Contains(got, `"id":"r-1","result"`) {
		t.Errorf("tools/call on the resumed session: %s", got)
	}
	call, listen := remoteB.callAndListen(t, "the resumed session's call and listen")
	if !strings.Contains(call, `"io.modelcontextprotocol/logLevel":"debug"`) {
		t.Errorf("the resumed session's call has no level: %s", call)
	}
	if !strings.Contains(listen, `"resourceSubscriptions":["file:///watched"]`) {
		t.Errorf("the resumed session's listen does not ask for its subscription: %s", listen)
	}
	// A change made on the replica that resumed the session is handed off
	// from there, with what it resumed.
	out = newRecording()
	handleMsg(t, cb, `{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"error"}}`, out)
	out.reply(t)
	if h, _ := sinkB.last(t); string(h.level) != `"error"` || !slices.Equal(h.subs, []string{"file:///watched"}) ||
		string(h.caps) != `{"sampling":{}}` || string(h.info) != `{"name":"c","version":"1"}` {
		t.Errorf("the resumed session's state after its setLevel: %+v", h)
	}
}

// subscribableDiscover answers server/discover as a 2026-07-28 server
// that takes resource subscriptions.
func subscribableDiscover(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"resources":{"subscribe":true}}}}`)
}

// callAndListen waits for the remote to get a tools/call and a
// subscriptions/listen, and returns the last body of each.
func (r *statelessRemote) callAndListen(t *testing.T, what string) (call, listen string) {
	t.Helper()
	testkit.WaitFor(t, what, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, body := range r.bodies {
			switch {
			case strings.Contains(body, `"method":"tools/call"`):
				call = body
			case strings.Contains(body, `"method":"subscriptions/listen"`):
				listen = body
			}
		}
		return call != "" && listen != ""
	})
	return call, listen
}

// TestOwnerBoundBackends: stdio servers (shared and per session) and
// legacy SSE remotes serve their sessions where they were opened: Resume
// fails with ErrNotPortable, and Open never calls the handoff sink.
func TestOwnerBoundBackends(t *testing.T) {
	shared := fakeServer("shared", testkit.FakeOptions{})
	perSession := fakeServer("isolated", testkit.FakeOptions{})
	perSession.Isolation = config.IsolationSession
	sse := testServer("legacy")
	sse.Type, sse.URL = config.TypeSSE, "http://127.0.0.1:1/sse"
	state := handoffState{kind: kindUpstream, session: "s", version: "2025-06-18"}.encode()
	for _, cfg := range []*config.Server{shared, perSession, sse} {
		s, err := New(cfg, "test", testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if c, err := s.Resume(context.Background(), newRecording(), state); !errors.Is(err, conn.ErrNotPortable) || c != nil {
			t.Errorf("%s: Resume = %v, %v; want ErrNotPortable", cfg.Name, c, err)
		}
		var sink handoffSink
		c, err := s.Open(sink.ctx(), newRecording())
		if err != nil {
			t.Fatalf("%s: Open: %v", cfg.Name, err)
		}
		c.Close()
		if n := sink.count(); n != 0 {
			t.Errorf("%s: Open handed off %d states", cfg.Name, n)
		}
		s.Close()
	}
}

// A portable session's notification returns from Handle only once the
// remote took it: the client's next request, through another replica,
// cannot overtake it (as a tools/list sent right after
// notifications/initialized must not). A session of one replica (no sink)
// is not held up.
func TestPortableNotificationDelivered(t *testing.T) {
	const note = `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`
	echo := echoserver.NewHandler()
	t.Cleanup(echo.Close)
	var gate atomic.Pointer[chan struct{}]
	arrived := make(chan struct{}, 4)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"notifications/roots/list_changed"`)) {
				arrived <- struct{}{}
				<-*gate.Load()
			}
		}
		echo.ServeHTTP(w, req)
	}))
	t.Cleanup(ts.Close)
	first := make(chan struct{})
	gate.Store(&first)
	s := newRemoteServer(t, ts.URL+"/mcp")
	var sink handoffSink
	c := openPortable(t, s, &sink)
	done := make(chan struct{})
	go func() {
		handleMsg(t, c, note, newRecording())
		close(done)
	}()
	testkit.Receive(t, arrived, "the notification at the remote")
	select {
	case <-done:
		t.Fatal("Handle returned before the remote took the notification")
	default:
	}
	close(first)
	testkit.Receive(t, done, "Handle's return once the remote took the notification")

	// Without a sink (one replica), nothing waits: Handle returns while
	// the remote still holds the notification.
	second := make(chan struct{})
	gate.Store(&second)
	single, err := s.Open(context.Background(), newRecording())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(second) // the remote takes it: single's Close need not abort it
		single.Close()
	}()
	out := newRecording()
	handleMsg(t, single, portableInit, out)
	out.reply(t)
	handleMsg(t, single, note, newRecording())
	testkit.Receive(t, arrived, "the single replica's notification at the remote")
}

// A portable session's upstream session outlives a replica's connection
// (another replica may serve it), but not its client's DELETE.
func TestPortableSessionEndsWithClientDelete(t *testing.T) {
	remote := newEchoRemote(t)
	url := remote.ts.URL + "/mcp"
	a, b := newRemoteServer(t, url), newRemoteServer(t, url)
	var sinkA, sinkB handoffSink
	ca := openPortable(t, a, &sinkA)
	_, state := sinkA.last(t)
	cb := resumeOn(t, b, &sinkB, state)
	cb.CloseWith("the gateway is shutting down")
	b.Close() // its connections' upstreams stopped
	if n := remote.echo.Sessions(); n != 1 {
		t.Fatalf("%d upstream sessions after a replica let go of its copy, want 1", n)
	}
	ca.CloseWith(conn.ReasonDeleted)
	testkit.WaitFor(t, "the upstream session ended by the client's DELETE", func() bool { return remote.echo.Sessions() == 0 })
}
