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

// legacyFake is a 2024-11-05 HTTP+SSE server: GET /sse opens a session
// whose first event names /message?sid=N; POSTs there are answered on the
// stream. POST /sse gets 405, as from a server without Streamable HTTP.
type legacyFake struct {
	t        *testing.T
	ts       *httptest.Server
	endpoint func(sid int) string // data of the endpoint event; default /message?sid=N

	mu      sync.Mutex
	streams map[int]chan string // session -> events to write
	drop    map[int]chan struct{}
	gets    int
	posts   []seen
}

func newLegacyFake(t *testing.T) *legacyFake {
	f := &legacyFake{t: t, streams: map[int]chan string{}, drop: map[int]chan struct{}{}}
	f.ts = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	return f
}

func (f *legacyFake) run() string {
	f.ts.Start()
	f.t.Cleanup(f.ts.Close)
	return f.ts.URL + "/sse"
}

// dropStream ends the event stream of session sid.
func (f *legacyFake) dropStream(sid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.drop[sid])
}

func (f *legacyFake) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/sse" && r.Method == http.MethodGet:
		f.mu.Lock()
		f.gets++
		sid := f.gets
		events, drop := make(chan string, 64), make(chan struct{})
		f.streams[sid], f.drop[sid] = events, drop
		f.mu.Unlock()
		ep := fmt.Sprintf("/message?sid=%d", sid)
		if f.endpoint != nil {
			ep = f.endpoint(sid)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		// Split across writes (and flushes): the reader must join them.
		flushWrite(w, "event: endp")
		flushWrite(w, "oint\ndata: "+ep[:len(ep)/2])
		flushWrite(w, ep[len(ep)/2:]+"\n\n")
		for {
			select {
			case ev := <-events:
				flushWrite(w, ev)
			case <-drop:
				return
			case <-r.Context().Done():
				return
			}
		}
	case r.URL.Path == "/message" && r.Method == http.MethodPost:
		var sid int
		fmt.Sscan(r.URL.Query().Get("sid"), &sid)
		body := make([]byte, r.ContentLength)
		_, _ = r.Body.Read(body)
		f.mu.Lock()
		f.posts = append(f.posts, seen{method: r.Method, header: r.Header.Clone(), body: string(body)})
		events := f.streams[sid]
		f.mu.Unlock()
		msg, err := jsonrpc.Parse(body)
		if events == nil || err != nil {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		if msg.Kind == jsonrpc.KindRequest {
			result := fmt.Appendf(nil, `{"method":%q,"sid":%d}`, msg.MethodName(), sid)
			events <- "event: message\ndata: " + string(jsonrpc.Response(msg.Bytes(msg.ID), result)) + "\n\n"
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		http.Error(w, "not here", http.StatusMethodNotAllowed)
	}
}

func (f *legacyFake) getCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

func TestLegacyLazyConnectAndReplies(t *testing.T) {
	f := newLegacyFake(t)
	c, r := start(t, Config{URL: f.run(), Transport: TransportSSE, Headers: map[string]string{"Authorization": "Bearer x"}})
	if n := f.getCount(); n != 0 {
		t.Fatalf("Start opened %d streams before any Send", n)
	}
	send(t, c, initReq)
	send(t, c, inited)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	r.waitLine(`"id":1`, `"method":"initialize"`)
	r.waitLine(`"id":2`, `"method":"tools/list"`, `"sid":1`)
	c.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.posts) != 3 {
		t.Errorf("%d POSTs, want 3", len(f.posts))
	}
	for _, p := range f.posts {
		if p.header.Get("Authorization") != "Bearer x" {
			t.Errorf("POST without the configured header")
		}
	}
}

// TestLegacyStreamLossStartsNewGeneration: a dropped stream ends generation
// 1; the next stream's endpoint starts generation 2.
func TestLegacyStreamLossStartsNewGeneration(t *testing.T) {
	f := newLegacyFake(t)
	c, r := start(t, Config{URL: f.run(), Transport: TransportSSE})
	send(t, c, initReq)
	r.waitLine(`"id":1`)
	f.dropStream(1)
	ex := r.waitKind("exited", 1)
	if !errors.Is(ex.err, ErrDisconnected) {
		t.Errorf("Exited(1, %v), want ErrDisconnected", ex.err)
	}
	r.waitKind("started", 2)
	send(t, c, `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}`)
	got := r.waitLine(`"id":7`)
	if !strings.Contains(got, `"sid":2`) {
		t.Errorf("reply on the new stream: %s", got)
	}
	for _, e := range r.snapshot() {
		if e.kind == "line" && strings.Contains(e.data, `"sid":2`) && e.gen != 2 {
			t.Errorf("message of the new stream delivered as gen %d", e.gen)
		}
	}
}

// TestAutoFallsBackToLegacy: a POST of initialize answered 405 makes the
// Client open the URL as a legacy SSE stream and send everything there.
func TestAutoFallsBackToLegacy(t *testing.T) {
	f := newLegacyFake(t)
	c, r := start(t, Config{URL: f.run()})
	send(t, c, initReq)
	send(t, c, inited)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	r.waitLine(`"id":1`, `"sid":1`)
	r.waitLine(`"id":2`, `"sid":1`)
}

// TestLegacyEndpointOtherOriginRefused: messages (and the configured
// credentials) never go to another origin.
func TestLegacyEndpointOtherOriginRefused(t *testing.T) {
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("request reached the other origin: %s %s", r.Method, r.URL)
	}))
	defer evil.Close()
	f := newLegacyFake(t)
	f.endpoint = func(int) string { return evil.URL + "/message" }
	c, r := start(t, Config{URL: f.run(), Transport: TransportSSE})
	send(t, c, initReq)
	ex := r.waitKind("exited", 1)
	if !errors.Is(ex.err, ErrDisconnected) || !strings.Contains(ex.err.Error(), "origin") {
		t.Errorf("Exited(1, %v)", ex.err)
	}
	c.Close()
}

func TestResolveEndpoint(t *testing.T) {
	base, _ := Start(Config{URL: "http://h:80/a/sse?k=1"}, newRecorder(t))
	defer base.Close()
	for in, want := range map[string]string{
		"/message?sessionId=abc":         "http://h:80/message?sessionId=abc",
		"message?x=1":                    "http://h:80/a/message?x=1",
		" http://h/m \n":                 "http://h/m",
		"http://h:80/m#frag":             "http://h:80/m",
		"https://h/m":                    "",
		"http://other/m":                 "",
		"//other:80/m":                   "",
		"":                               "",
		"http://h:81/m":                  "",
		"http://user@h/m":                "http://user@h/m",
		"%zz":                            "",
		"javascript:alert(1)":            "",
		"/message?sessionId=a%20b&x=%2F": "http://h:80/message?sessionId=a%20b&x=%2F",
	} {
		got, err := resolveEndpoint(base.base, in)
		switch {
		case want == "" && err == nil:
			t.Errorf("resolveEndpoint(%q) = %v, want an error", in, got)
		case want != "" && (err != nil || got.String() != want):
			t.Errorf("resolveEndpoint(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
}
