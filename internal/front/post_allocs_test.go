package front

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// reusedWriter is a ResponseWriter used again for every request of an
// allocation count, so that only the handler's allocations are counted.
type reusedWriter struct {
	h      http.Header
	status int
	body   []byte
}

func (w *reusedWriter) Header() http.Header { return w.h }
func (w *reusedWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}

func (w *reusedWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body = append(w.body, b...)
	return len(b), nil
}

func (w *reusedWriter) reset() {
	clear(w.h)
	w.status, w.body = 0, w.body[:0]
}

// TestPOSTAllocs keeps the allocations of a session's tools/call POST, from
// the handler's entry to its JSON answer (the multiplexer answering at
// once, as in BenchmarkPOST), at the nine they are, with metrics on (an
// Observer: the audit path) and off:
//
//   - admission: the request's context with its Request (with the room for
//     the audit Exchange when observed), and the request's copy with it;
//   - the POST's body and its parsed messages;
//   - its session stream and the stream's wake channel;
//   - the multiplexer's pending call, and the reply spliced with the
//     client's id;
//   - the ServeMux's path values (the server's name).
//
// Before issue 22's cuts there were ten, and eleven with metrics on (the
// events taken from the stream; the Exchange of its own).
func TestPOSTAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts of a -race build differ")
	}
	for _, tc := range []struct {
		name     string
		observer bool
		max      float64
	}{
		{"metrics off", false, 9},
		{"metrics on", true, 9}, // the audit Exchange in the context's allocation
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mux.New(mux.Options{Name: "allocs"})
			defer m.Close()
			m.SetUpstream(testkit.Genless(&loopback{m: m}))
			m.Started(1)
			cfg := Config{Backends: map[string]conn.Backend{"echo": muxBackend{m: m}}}
			if tc.observer {
				cfg.Observer = nopObserver{}
			}
			h := New(cfg)
			defer h.Close()

			init := httptest.NewRequest(http.MethodPost, "/servers/echo/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`))
			init.Header.Set("Content-Type", "application/json")
			init.Header.Set("Accept", "application/json, text/event-stream")
			iw := httptest.NewRecorder()
			h.ServeHTTP(iw, init)
			session := iw.Header().Get("Mcp-Session-Id")
			if iw.Code != http.StatusOK || session == "" {
				t.Fatalf("initialize: %d %s", iw.Code, iw.Body)
			}

			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`
			rd := strings.NewReader(body)
			r := httptest.NewRequest(http.MethodPost, "/servers/echo/mcp", nil)
			r.Body, r.ContentLength = io.NopCloser(rd), int64(len(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("Mcp-Session-Id", session)
			r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			w := &reusedWriter{h: http.Header{}}
			post := func() {
				rd.Reset(body)
				w.reset()
				h.ServeHTTP(w, r)
				if w.status != http.StatusOK || !bytes.Contains(w.body, []byte(`"id":7`)) {
					t.Fatalf("%d %s", w.status, w.body)
				}
			}
			post() // warm the pools and maps
			n := testing.AllocsPerRun(200, post)
			t.Logf("%.0f allocations per POST", n)
			if n > tc.max {
				t.Errorf("%.0f allocations per POST, want at most %.0f", n, tc.max)
			}
		})
	}
}
