package remote

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// fakeServer is a small Streamable HTTP server for the edge cases the real
// peers do not produce on demand. By default it answers initialize with a
// new session, every other request with {"result":{"method":M}} as JSON,
// notifications and responses with 202, GET with 405 and DELETE with 200.
// Hooks replace parts of that.
type fakeServer struct {
	t  *testing.T
	ts *httptest.Server

	// Hooks, set before the first request.
	request func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool // true: handled
	get     func(w http.ResponseWriter, r *http.Request)                                // nil: 405
	notify  func(method string)                                                         // before the 202

	mu       sync.Mutex
	log      []seen
	sessions map[string]bool
	nsess    int
}

// seen is one request the fake server got.
type seen struct {
	method string // HTTP method
	header http.Header
	body   string
	rpc    string // JSON-RPC method, if any
}

func newFake(t *testing.T) *fakeServer {
	f := &fakeServer{t: t, sessions: map[string]bool{}}
	f.ts = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	return f
}

// run starts the server (after the hooks are set) and returns its URL.
func (f *fakeServer) run() string {
	f.ts.Start()
	f.t.Cleanup(f.ts.Close)
	return f.ts.URL + "/mcp"
}

// expire ends every session, as a restarted server would.
func (f *fakeServer) expire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions = map[string]bool{}
}

func (f *fakeServer) seen() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.log...)
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := seen{method: r.Method, header: r.Header.Clone(), body: string(body)}
	var msg jsonrpc.Message
	if r.Method == http.MethodPost {
		var err error
		if msg, err = jsonrpc.Parse(body); err != nil {
			http.Error(w, "bad JSON-RPC", http.StatusBadRequest)
			return
		}
		rec.rpc = msg.MethodName()
	}
	f.mu.Lock()
	f.log = append(f.log, rec)
	sid := r.Header.Get("Mcp-Session-Id")
	known := f.sessions[sid]
	f.mu.Unlock()

	switch r.Method {
	case http.MethodGet:
		if !known {
			http.Error(w, "no session", http.StatusNotFound)
		} else if f.get != nil {
			f.get(w, r)
		} else {
			http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
		}
		return
	case http.MethodDelete:
		f.mu.Lock()
		delete(f.sessions, sid)
		f.mu.Unlock()
		return
	case http.MethodPost:
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	id := msg.Bytes(msg.ID)
	if msg.MethodIs("initialize") {
		f.mu.Lock()
		f.nsess++
		sid = fmt.Sprintf("sess-%d", f.nsess)
		f.sessions[sid] = true
		f.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
		w.Header().Set("Content-Type", "application/json")
		w.Write(jsonrpc.Response(id, []byte(`{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}`)))
		return
	}
	if !known {
		http.Error(w, "unknown session", http.StatusNotFound)
		return
	}
	if msg.Kind != jsonrpc.KindRequest {
		if f.notify != nil {
			f.notify(msg.MethodName())
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if f.request != nil && f.request(w, r, msg.MethodName(), id) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(jsonrpc.Response(id, fmt.Appendf(nil, `{"method":%q}`, msg.MethodName())))
}
