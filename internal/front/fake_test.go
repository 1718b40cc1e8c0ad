package front

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeBackend opens fakeConns: a server that answers "initialize" and any
// request at once, except "hold" (answered only by release or Close) and
// "flood" (1,000 progress notifications, then the reply).
type fakeBackend struct {
	conn.OwnerBound
	conn.SessionsOnly               // statelessBackend serves the stateless revision
	version           string        // negotiated by initialize; default 2025-06-18
	initError         bool          // initialize gets an error reply
	initHold          bool          // initialize gets a log message, then is held like "hold"
	openErr           error         // Open fails
	silentClose       bool          // Close answers nothing (a broken Conn)
	closeWith         bool          // Conns tell held requests CloseWith's reason
	closeBlock        chan struct{} // Close waits on it when set
	openEntered       chan struct{} // when set, Open signals here, then waits on openBlock
	openBlock         chan struct{}

	opens    atomic.Int32
	closes   atomic.Int32 // Conn.Close calls
	abandons atomic.Int32 // Conn.Abandon calls
	conns    chan *fakeConn
}

func newFakeBackend() *fakeBackend { return &fakeBackend{conns: make(chan *fakeConn, 64)} }

func (b *fakeBackend) Open(_ context.Context, general conn.Stream) (conn.Conn, error) {
	b.opens.Add(1)
	if b.openEntered != nil {
		b.openEntered <- struct{}{}
		<-b.openBlock
	}
	if b.openErr != nil {
		return nil, b.openErr
	}
	c := &fakeConn{b: b, general: general, held: make(chan struct{}, 64)}
	b.conns <- c
	if b.closeWith {
		return reasonConn{c}, nil
	}
	return c, nil
}

// reasonConn is a fakeConn with CloseWith: like the mux's Client, it tells
// the held requests why the session ended ("mcpgate: " + reason).
type reasonConn struct{ *fakeConn }

func (c reasonConn) CloseWith(reason string) {
	c.mu.Lock()
	c.reason = reason
	c.mu.Unlock()
	c.fakeConn.Close()
}

type held struct {
	id  []byte
	out conn.Stream
}

type fakeConn struct {
	b       *fakeBackend
	general conn.Stream
	held    chan struct{} // a "hold" request arrived

	mu      sync.Mutex
	version string
	pending []held
	reason  string // given to CloseWith
	seen    []byte // the last request, as it arrived
}

func (c *fakeConn) Handle(_ context.Context, msg *jsonrpc.Message, out conn.Stream) {
	if msg.Kind != jsonrpc.KindRequest {
		return
	}
	c.mu.Lock()
	c.seen = bytes.Clone(msg.Raw)
	c.mu.Unlock()
	id := bytes.Clone(msg.Bytes(msg.ID))
	switch msg.MethodName() {
	case "initialize":
		if c.b.initHold {
			out.Send(jsonrpc.Notification("notifications/message", []byte(`{"level":"info","data":"starting"}`)))
			c.mu.Lock()
			c.pending = append(c.pending, held{id, out})
			c.mu.Unlock()
			c.held <- struct{}{}
			return
		}
		if c.b.initError {
			out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, "server exited: command not found"))
			return
		}
		v := c.b.version
		if v == "" {
			v = "2025-06-18"
		}
		c.mu.Lock()
		c.version = v
		c.mu.Unlock()
		out.Reply(jsonrpc.Response(id, []byte(`{"protocolVersion":"`+v+`","capabilities":{}}`)))
	case "hold":
		c.mu.Lock()
		c.pending = append(c.pending, held{id, out})
		c.mu.Unlock()
		c.held <- struct{}{}
	case "progress": // one related message first: the reply is an SSE stream
		out.Send(jsonrpc.Notification("notifications/progress", []byte(`{"progressToken":1,"progress":1}`)))
		out.Reply(jsonrpc.Response(id, []byte(`{}`)))
	case "flood":
		for range 1000 {
			out.Send(jsonrpc.Notification("notifications/progress", []byte(`{"progressToken":1,"progress":1}`)))
		}
		out.Reply(jsonrpc.Response(id, []byte(`{"flooded":true}`)))
	case "slowMissing": // the same refusal, after a while
		go func() {
			time.Sleep(20 * time.Millisecond)
			out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeMethodNotFound, "Method not found"))
		}()
	case "missing": // a method the server does not have
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeMethodNotFound, "Method not found"))
	case "echoParams": // the params, written last by the test, back as the result
		_, params, _ := bytes.Cut(msg.Raw, []byte(`"params":`))
		out.Reply(jsonrpc.Response(id, bytes.Clone(params[:len(params)-1])))
	default:
		out.Reply(jsonrpc.Response(id, []byte(`{}`)))
	}
}

// release answers the held requests with a result.
func (c *fakeConn) release() {
	c.mu.Lock()
	p := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, h := range p {
		h.out.Reply(jsonrpc.Response(h.id, []byte(`{"released":true}`)))
	}
}

func (c *fakeConn) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

func (c *fakeConn) Abandon(conn.Stream) { c.b.abandons.Add(1) }

// CloseWith is Close: a plain fakeConn tells no reason (reasonConn does).
func (c *fakeConn) CloseWith(string) { c.Close() }

// Close answers every held request with an error, as the mux's Client.Close does.
func (c *fakeConn) Close() {
	c.b.closes.Add(1)
	if c.b.closeBlock != nil {
		<-c.b.closeBlock
	}
	if c.b.silentClose {
		return
	}
	c.mu.Lock()
	p := c.pending
	c.pending = nil
	text := "conn closed: session ended"
	if c.reason != "" {
		text = "mcpgate: " + c.reason
	}
	c.mu.Unlock()
	for _, h := range p {
		h.out.Reply(jsonrpc.ErrorResponse(h.id, protocol.CodeServerError, text))
	}
}

// testServer serves a Handler for b as server "x".
func testServer(t *testing.T, b *fakeBackend, cfg Config) (*Handler, *httptest.Server) {
	t.Helper()
	cfg.Backends = map[string]conn.Backend{"x": b}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := New(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return h, srv
}

const mcpPath = "/servers/x/mcp"

// do sends a request with a 10 s deadline and returns status, headers and body.
func do(t *testing.T, srv *httptest.Server, method, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return &http.Response{}, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: reading body: %v", method, path, err)
	}
	return resp, string(b)
}

// initSession initializes a session and returns its id.
func initSession(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	return id
}

// postAsync POSTs body in session sid and delivers the response body.
func postAsync(t *testing.T, srv *httptest.Server, sid, version, body string) <-chan string {
	out := make(chan string, 1)
	go func() {
		resp, b := do(t, srv, http.MethodPost, mcpPath, body, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", version)
		out <- resp.Status + "\n" + b
	}()
	return out
}
