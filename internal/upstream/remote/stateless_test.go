package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// modernServer is an httptest server speaking the 2026-07-28 revision as
// far as these tests need: it checks the headers of every POST against its
// body and answers by method, or for tools/call by tool name.
type modernServer struct {
	t  *testing.T
	ts *httptest.Server

	// discover, if set, answers server/discover instead of the default
	// result listing 2026-07-28.
	discover func(w http.ResponseWriter)

	mu      sync.Mutex
	headers []http.Header // of every POST
	hung    chan struct{} // closed when a "hang" request arrived
	gone    chan struct{} // closed when a "hang" request's context ends
}

const modernDiscover = `{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"tools":{}}}`

func newModernServer(t *testing.T) *modernServer {
	s := &modernServer{t: t, hung: make(chan struct{}), gone: make(chan struct{})}
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.ts.Close)
	return s
}

func (s *modernServer) url() string { return s.ts.URL + "/mcp" }

func (s *modernServer) lastHeader() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[len(s.headers)-1]
}

func (s *modernServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Parse(body)
	if err != nil || m.Kind != jsonrpc.KindRequest {
		http.Error(w, "not a request", http.StatusBadRequest)
		return
	}
	id := string(m.Bytes(m.ID))
	method := m.MethodName()
	if got := r.Header.Get("Mcp-Method"); got != method {
		writeJSON(w, http.StatusBadRequest, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32020,"message":"Mcp-Method mismatch"}}`)
		return
	}
	if r.Header.Get("MCP-Protocol-Version") != "2026-07-28" || r.Header.Get("Accept") != "application/json, text/event-stream" {
		writeJSON(w, http.StatusBadRequest, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32020,"message":"bad headers"}}`)
		return
	}
	switch method {
	case "server/discover":
		if s.discover != nil {
			s.discover(w)
			return
		}
		writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+id+`,"result":`+modernDiscover+`}`)
		return
	case "tools/call":
	default:
		writeJSON(w, http.StatusNotFound, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32601,"message":"method not found"}}`)
		return
	}
	switch tool := r.Header.Get("Mcp-Name"); tool {
	case "json":
		writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[]}}`)
	case "sse":
		w.Header().Set("Content-Type", "text/event-stream")
		flushWrite(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		flushWrite(w, ": keep-alive\n\n")
		flushWrite(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"sampling/createMessage\"}\n\n")
		flushWrite(w, "event: other\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/other\"}\n\n")
		flushWrite(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+id+",\"result\":{\"content\":[]}}\n\n")
	case "sse-open":
		// The reply, then the stream stays open until the client leaves.
		w.Header().Set("Content-Type", "text/event-stream")
		flushWrite(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+id+",\"result\":{}}\n\n")
		<-r.Context().Done()
	case "sse-noreply":
		w.Header().Set("Content-Type", "text/event-stream")
		flushWrite(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n")
	case "null-id":
		writeJSON(w, http.StatusBadRequest, `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"invalid params"}}`)
	case "plain-400":
		http.Error(w, "bad request", http.StatusBadRequest)
	case "html-200":
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html></html>")
	case "big-json":
		writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+id+`,"result":{"text":"`+strings.Repeat("x", 4096)+`"}}`)
	case "big-sse":
		w.Header().Set("Content-Type", "text/event-stream")
		flushWrite(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+id+",\"result\":{\"text\":\""+strings.Repeat("x", 4096)+"\"}}\n\n")
	case "hang":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(s.hung)
		<-r.Context().Done()
		close(s.gone)
	default:
		writeJSON(w, http.StatusOK, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32602,"message":"unknown tool"}}`)
	}
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// newStateless returns a Stateless for url, closed at cleanup.
func newStateless(t *testing.T, cfg Config) *Stateless {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := NewStateless(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// answer is what one Do call reported.
type answer struct {
	sent    []string
	reply   string
	replied int
}

func do(t *testing.T, ctx context.Context, s *Stateless, msg string) answer {
	t.Helper()
	var a answer
	s.Do(ctx, []byte(msg), nil, func(m []byte) { a.sent = append(a.sent, string(m)) }, func(m []byte) {
		a.reply = string(m)
		a.replied++
	})
	if a.replied > 1 {
		t.Errorf("%s: %d replies", msg, a.replied)
	}
	return a
}

// call is a 2026-07-28 tools/call of tool with id.
func call(id, tool string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool +
		`","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
}

func TestStatelessDo(t *testing.T) {
	srv := newModernServer(t)
	s := newStateless(t, Config{Name: "modern", URL: srv.url(), MaxMessageBytes: 1024,
		Headers: map[string]string{"Authorization": "Bearer t0ken"}})
	for _, tc := range []struct {
		tool  string
		reply string   // substrings of the reply
		sent  []string // substrings of each message sent before it, in order
	}{
		{tool: "json", reply: `"id":"a-1","result":{"content":[]}`},
		// The server request and the event of another type are dropped.
		{tool: "sse", reply: `"id":"a-1","result":{"content":[]}`, sent: []string{"notifications/progress"}},
		{tool: "sse-open", reply: `"id":"a-1","result":{}`},
		{tool: "sse-noreply", reply: `"id":"a-1","error":{"code":-32000,"message":"mcpgate: upstream request failed: upstream closed the stream before replying"`,
			sent: []string{"notifications/message"}},
		// A JSON-RPC error with a 4xx status is the reply, with the client's id.
		{tool: "null-id", reply: `{"jsonrpc":"2.0","id":"a-1","error":{"code":-32602,"message":"invalid params"}}`},
		{tool: "plain-400", reply: `"id":"a-1","error":{"code":-32000,"message":"mcpgate: upstream answered HTTP 400 Bad Request"`},
		{tool: "html-200", reply: `"id":"a-1","error":{"code":-32000,"message":"mcpgate: upstream request failed: upstream replied with HTTP 200 and content type \"text/html\""`},
		{tool: "big-json", reply: `"id":"a-1","error":{"code":-32603,"message":"mcpgate: reply exceeds the size limit (1025 bytes and more)"`},
		{tool: "big-sse", reply: `"id":"a-1","error":{"code":-32603,"message":"mcpgate: reply exceeds the size limit`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			a := do(t, context.Background(), s, call(`"a-1"`, tc.tool))
			if a.replied != 1 || !strings.Contains(a.reply, tc.reply) {
				t.Errorf("reply %q (%d), want %q", a.reply, a.replied, tc.reply)
			}
			if len(a.sent) != len(tc.sent) {
				t.Fatalf("sent %q, want %q", a.sent, tc.sent)
			}
			for i, want := range tc.sent {
				if !strings.Contains(a.sent[i], want) {
					t.Errorf("sent[%d] = %q, want %q", i, a.sent[i], want)
				}
			}
			h := srv.lastHeader()
			if h.Get("Authorization") != "Bearer t0ken" || h.Get("Mcp-Name") != tc.tool || h.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", h)
			}
		})
	}
	// A method the server lacks: its 404 error is the reply as it came.
	a := do(t, context.Background(), s, `{"jsonrpc":"2.0","id":7,"method":"unknown/method","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if a.reply != `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"method not found"}}` {
		t.Errorf("unknown/method: %s", a.reply)
	}
}

func TestStatelessCancel(t *testing.T) {
	srv := newModernServer(t)
	s := newStateless(t, Config{Name: "modern", URL: srv.url()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan answer)
	go func() { done <- do(t, ctx, s, call("1", "hang")) }()
	select {
	case <-srv.hung:
	case <-time.After(waitTimeout):
		t.Fatal("the request did not reach the server")
	}
	cancel()
	select {
	case a := <-done:
		if a.replied != 0 {
			t.Errorf("a cancelled request got a reply: %s", a.reply)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Do did not return after its ctx was cancelled")
	}
	select {
	case <-srv.gone: // closing the stream is the revision's cancellation
	case <-time.After(waitTimeout):
		t.Fatal("the server's request did not end")
	}
}

func TestStatelessTimeout(t *testing.T) {
	srv := newModernServer(t)
	s := newStateless(t, Config{Name: "modern", URL: srv.url()})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a := do(t, ctx, s, call("2", "hang"))
	if want := `{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"mcpgate: request timed out"}}`; a.reply != want {
		t.Errorf("reply %s, want %s", a.reply, want)
	}
	<-srv.gone
}

func TestStatelessUnreachable(t *testing.T) {
	s := newStateless(t, Config{Name: "gone", URL: "http://127.0.0.1:" + freePort(t) + "/mcp"})
	a := do(t, context.Background(), s, call("3", "json"))
	if !strings.Contains(a.reply, `"id":3,"error":{"code":-32000,"message":"mcpgate: remote http://127.0.0.1:`) ||
		!strings.Contains(a.reply, "unreachable") {
		t.Errorf("reply %s", a.reply)
	}
	if _, err := s.Discover(context.Background()); err == nil || errors.Is(err, ErrNotModern) {
		t.Errorf("Discover of an unreachable server: %v, want an error that is no verdict", err)
	}
}

func TestStatelessDiscover(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  func(w http.ResponseWriter)
		modern  bool
		verdict bool // the error wraps ErrNotModern
	}{
		{"modern", nil, true, true},
		{"modern over SSE", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"mcpgate-discover\",\"result\":"+modernDiscover+"}\n\n")
		}, true, true},
		{"session-era versions only", func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"jsonrpc":"2.0","id":"mcpgate-discover","result":{"supportedVersions":["2025-11-25"],"capabilities":{}}}`)
		}, false, true},
		{"method not found", func(w http.ResponseWriter) {
			writeJSON(w, 404, `{"jsonrpc":"2.0","id":"mcpgate-discover","error":{"code":-32601,"message":"Method not found"}}`)
		}, false, true},
		{"legacy error in 200", func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`)
		}, false, true},
		{"400 without JSON-RPC", func(w http.ResponseWriter) { http.Error(w, "Bad Request: no session", 400) }, false, true},
		{"405", func(w http.ResponseWriter) { w.WriteHeader(405) }, false, true},
		{"not JSON-RPC", func(w http.ResponseWriter) { writeJSON(w, 200, `{"hello":1}`) }, false, true},
		{"401", func(w http.ResponseWriter) { http.Error(w, "no", 401) }, false, false},
		{"401 with a JSON-RPC error", func(w http.ResponseWriter) {
			writeJSON(w, 401, `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"unauthorized"}}`)
		}, false, false},
		{"503", func(w http.ResponseWriter) { http.Error(w, "busy", 503) }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newModernServer(t)
			srv.discover = tc.answer
			s := newStateless(t, Config{Name: "d", URL: srv.url()})
			result, err := s.Discover(context.Background())
			if tc.modern {
				if err != nil || !strings.Contains(string(result), `"supportedVersions":["2026-07-28"`) {
					t.Fatalf("Discover = %s, %v; want the result", result, err)
				}
				return
			}
			if err == nil || errors.Is(err, ErrNotModern) != tc.verdict {
				t.Fatalf("Discover error %v; want one that is a verdict: %v", err, tc.verdict)
			}
			h := srv.lastHeader()
			if h.Get("Mcp-Method") != "server/discover" || h.Get("MCP-Protocol-Version") != "2026-07-28" {
				t.Errorf("headers %v", h)
			}
		})
	}
}

func TestStatelessDiscoverHangs(t *testing.T) {
	srv := newModernServer(t)
	unblock := make(chan struct{})
	defer close(unblock)
	srv.discover = func(w http.ResponseWriter) { <-unblock }
	s := newStateless(t, Config{Name: "d", URL: srv.url()})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Discover(ctx); err == nil || errors.Is(err, ErrNotModern) {
		t.Fatalf("Discover of a server that does not answer: %v, want an error that is no verdict", err)
	}
}

func TestSetRequestHeaders(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, tc := range []struct {
		msg  string
		name string // Mcp-Name; "-" for none
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, "echo"},
		{`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"Hello, 世界",` + meta + `}}`, "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":" padded ","name":"x",` + meta + `}}`, "=?base64?IHBhZGRlZCA=?="},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"=?base64?literal?=",` + meta + `}}`, "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x",` + meta + `}}`, "-"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7,` + meta + `}}`, "-"},
	} {
		h := http.Header{}
		setRequestHeaders(h, []byte(tc.msg))
		name := "-"
		if v, ok := h["Mcp-Name"]; ok {
			name = v[0]
		}
		m, _ := jsonrpc.Parse([]byte(tc.msg))
		if name != tc.name || h.Get("Mcp-Method") != m.MethodName() || h.Get("Mcp-Protocol-Version") != "2026-07-28" {
			t.Errorf("%s: headers %v, want Mcp-Name %q", tc.msg, h, tc.name)
		}
	}
}

// TestStatelessGoConformanceServer runs requests against the Go SDK's
// conformance server: stateless (its default), it speaks the revision;
// stateful, it does not.
func TestStatelessGoConformanceServer(t *testing.T) {
	requirePeers(t, goEverything)
	port := freePort(t)
	runPeer(t, port, nil, goEverything, "-http", "127.0.0.1:"+port)
	s := newStateless(t, Config{Name: "go-everything", URL: "http://127.0.0.1:" + port + "/mcp"})
	result, err := s.Discover(context.Background())
	if err != nil || !strings.Contains(string(result), `"tools":{`) {
		t.Fatalf("Discover = %s, %v", result, err)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	a := do(t, context.Background(), s, `{"jsonrpc":"2.0","id":"L","method":"tools/list","params":{`+meta+`}}}`)
	if !strings.Contains(a.reply, `"id":"L","result"`) || !strings.Contains(a.reply, "test_tool_with_progress") {
		t.Fatalf("tools/list: %.300s", a.reply)
	}
	a = do(t, context.Background(), s, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},`+meta+`,"progressToken":"tok-5"}}}`)
	if !strings.Contains(a.reply, `"id":5,"result"`) {
		t.Fatalf("test_tool_with_progress: %s", a.reply)
	}
	if n := len(a.sent); n != 3 || !strings.Contains(a.sent[0], `"progressToken":"tok-5"`) {
		t.Errorf("%d messages before the reply, want 3 progress notifications: %q", n, a.sent)
	}
	a = do(t, context.Background(), s, `{"jsonrpc":"2.0","id":6,"method":"unknown/method","params":{`+meta+`}}}`)
	if !strings.Contains(a.reply, `"id":6,"error":{"code":-32601`) {
		t.Errorf("unknown/method: %s", a.reply)
	}
	// Mcp-Param-* headers the caller has are passed on; the server checks
	// them against the arguments.
	xcall := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_x_mcp_header","arguments":{"region":"Zürich"},` + meta + `}}}`
	a = do(t, context.Background(), s, xcall)
	if !strings.Contains(a.reply, `"id":7,"error":{"code":-32020`) {
		t.Errorf("test_x_mcp_header without Mcp-Param-Region: %s", a.reply)
	}
	var b answer
	s.Do(context.Background(), []byte(xcall), http.Header{"mcp-param-region": {"=?base64?WsO8cmljaA==?="}}, nil,
		func(m []byte) { b.reply = string(m) })
	if !strings.Contains(b.reply, `"id":7,"result"`) {
		t.Errorf("test_x_mcp_header with Mcp-Param-Region: %s", b.reply)
	}
	// Many requests at once share the client: each gets its own reply.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			id := fmt.Sprint(100 + i)
			a := do(t, context.Background(), s, call(id, "test_simple_text"))
			if !strings.Contains(a.reply, `"id":`+id+`,"result"`) {
				t.Errorf("request %s: %s", id, a.reply)
			}
		})
	}
	wg.Wait()

	stateful := freePort(t)
	runPeer(t, stateful, nil, goEverything, "-http", "127.0.0.1:"+stateful, "-stateless=false")
	s = newStateless(t, Config{Name: "go-everything-stateful", URL: "http://127.0.0.1:" + stateful + "/mcp"})
	if _, err := s.Discover(context.Background()); !errors.Is(err, ErrNotModern) {
		t.Errorf("Discover of the stateful server: %v, want ErrNotModern", err)
	}
}
