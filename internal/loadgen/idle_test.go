package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/echoserver"
)

func TestIdleHoldsSessionsAndStreams(t *testing.T) {
	srv, h := echoServer(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	var atHold struct{ sessions, streams int }
	res, err := Idle(ctx, IdleOptions{
		URL: srv.URL, Sessions: 50, Streams: 10, Parallel: 8,
		Progress: func(p IdleProgress) {
			if p.Phase == "holding" && atHold.sessions == 0 {
				atHold.sessions, atHold.streams = h.Sessions(), h.Streams()
				cancel() // Hold 0: held until ctx ends
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Opened != 50 || res.Failed != 0 || res.Streams != 10 || res.StreamsFailed != 0 {
		t.Fatalf("result %+v", res)
	}
	if atHold.sessions != 50 || atHold.streams != 10 {
		t.Fatalf("server held %d sessions, %d streams; want 50, 10", atHold.sessions, atHold.streams)
	}
	if h.Sessions() != 0 {
		t.Errorf("%d sessions left after Idle", h.Sessions())
	}
}

func TestIdleCountsFailures(t *testing.T) {
	var inits, gets atomic.Int64
	h := echoserver.NewHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" && inits.Add(1) > 7 {
			http.Error(w, "full", http.StatusServiceUnavailable)
			return
		}
		if r.Method == http.MethodGet && gets.Add(1) > 2 {
			http.Error(w, "no", http.StatusConflict)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer h.Close()
	res, err := Idle(t.Context(), IdleOptions{URL: srv.URL, Sessions: 10, Streams: 4, Hold: time.Millisecond, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Opened != 7 || res.Failed != 3 || res.Streams != 2 || res.StreamsFailed != 2 || res.FirstError == "" {
		t.Fatalf("result %+v; want 7 opened, 3 failed, 2 streams, 2 streams failed", res)
	}
	if h.Sessions() != 0 {
		t.Errorf("%d sessions left after Idle", h.Sessions())
	}
}

// TestIdleRefusesStateless: the stateless revision has no sessions to hold.
func TestIdleRefusesStateless(t *testing.T) {
	_, err := Idle(t.Context(), IdleOptions{URL: "http://127.0.0.1:1/mcp", Version: "2026-07-28"})
	if err == nil || !strings.Contains(err.Error(), "2026-07-28 has none") {
		t.Fatalf("Idle = %v, want it refused", err)
	}
}
