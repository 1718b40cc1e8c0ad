package front

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// loopback answers every request at once from inside Send, as a server's
// reply read by the upstream reader would arrive.
type loopback struct {
	m    *mux.Mux
	resp []byte
}

func (u *loopback) Send(_ context.Context, msg []byte) error {
	req, err := jsonrpc.Parse(msg)
	if err != nil || req.Kind != jsonrpc.KindRequest {
		return err
	}
	u.resp = append(u.resp[:0], `{"jsonrpc":"2.0","id":`...)
	u.resp = append(u.resp, req.Bytes(req.ID)...)
	u.resp = append(u.resp, `,"result":{"protocolVersion":"2025-11-25","supportedVersions":["2026-07-28"],"capabilities":{},"content":[{"type":"text","text":"ok"}]}}`...)
	u.m.Line(1, u.resp)
	return nil
}

// TrySend is Send: the loopback never blocks.
func (u *loopback) TrySend(msg []byte) error { return u.Send(context.Background(), msg) }

type muxBackend struct {
	conn.OwnerBound
	m *mux.Mux
}

func (muxBackend) Resume(context.Context, conn.Stream, []byte) (conn.Conn, error) {
	return nil, conn.ErrNotPortable
}

func (muxBackend) ServesStateless() bool { return false }
func (muxBackend) OpenStateless(context.Context, conn.Stream, string, []byte) (conn.StatelessConn, error) {
	return conn.StatelessConn{}, conn.ErrSessionsOnly
}

func (b muxBackend) Open(_ context.Context, general conn.Stream) (conn.Conn, error) {
	return b.m.Join(general), nil
}

// BenchmarkPOST measures the HTTP front in process: one tools/call POST,
// checked and parsed, through the multiplexer to an upstream that answers
// at once, and its reply written as the SSE stream of a 2025-11-25 session.
func BenchmarkPOST(b *testing.B) {
	m := mux.New(mux.Options{Name: "bench"})
	defer m.Close()
	m.SetUpstream(testkit.Genless(&loopback{m: m}))
	m.Started(1)
	h := New(Config{Backends: map[string]conn.Backend{"echo": muxBackend{m: m}}})
	defer h.Close()

	post := func(body, session string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/servers/echo/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			r.Header.Set("Mcp-Session-Id", session)
			r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	init := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, "")
	session := init.Header().Get("Mcp-Session-Id")
	if init.Code != http.StatusOK || session == "" {
		b.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + strings.Repeat("x", 900) + `"}}}`
	b.ReportAllocs()
	for b.Loop() {
		w := post(body, session)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"id":7`) {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}

// modernBackend serves stateless requests the way a shared server of the
// revision does: each request joins a Modern multiplexer as a client of
// its own.
type modernBackend struct {
	conn.OwnerBound
	m *mux.Mux
}

func (b modernBackend) Open(_ context.Context, general conn.Stream) (conn.Conn, error) {
	return b.m.Join(general), nil
}

func (modernBackend) Resume(context.Context, conn.Stream, []byte) (conn.Conn, error) {
	return nil, conn.ErrNotPortable
}

func (b modernBackend) ServesStateless() bool { return true }

func (b modernBackend) OpenStateless(_ context.Context, general conn.Stream, version string, caps []byte) (conn.StatelessConn, error) {
	c := b.m.Join(general)
	c.Stateless(version, caps)
	return conn.NewStatelessConn(c, c.ServerInit, c.Passthrough()), nil
}

// BenchmarkPOSTStateless is BenchmarkPOST for a 2026-07-28 request: no
// session, the request opens its own connection to a server that speaks
// the revision, and gets one JSON body.
func BenchmarkPOSTStateless(b *testing.B) {
	m := mux.New(mux.Options{Name: "bench", Modern: true})
	defer m.Close()
	m.SetUpstream(testkit.Genless(&loopback{m: m}))
	m.Started(1)
	h := New(Config{Backends: map[string]conn.Backend{"echo": modernBackend{m: m}}})
	defer h.Close()
	body := modernBody("7", "tools/call", `"name":"echo","arguments":{"message":"`+strings.Repeat("x", 900)+`"}`)
	r := httptest.NewRequest(http.MethodPost, "/servers/echo/mcp", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	r.Header.Set("Mcp-Method", "tools/call")
	r.Header.Set("Mcp-Name", "echo")
	b.ReportAllocs()
	for b.Loop() {
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"id":7`) {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}
