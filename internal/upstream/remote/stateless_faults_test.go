package remote

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

func atkServer(t *testing.T, h http.HandlerFunc) string {
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func readID(r *http.Request) string {
	b, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Parse(b)
	if err != nil {
		return "null"
	}
	return string(m.Bytes(m.ID))
}

func TestAttackDiscoverStreamBrokenIsNoVerdict(t *testing.T) {
	url := atkServer(t, func(w http.ResponseWriter, r *http.Request) {
		readID(r)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		// close the connection without the reply
		hj, ok := w.(http.Hijacker)
		if ok {
			c, _, _ := hj.Hijack()
			c.Close()
		}
	})
	s := newStateless(t, Config{Name: "x", URL: url, Transport: TransportHTTP})
	_, err := s.Discover(context.Background())
	if err == nil || errors.Is(err, ErrNotModern) {
		t.Errorf("Discover after a broken stream = %v; want a non-verdict error", err)
	}
}

func TestAttackDiscoverStallAfterHeadersIsNoVerdict(t *testing.T) {
	for _, ct := range []string{"text/event-stream", "application/json"} {
		t.Run(ct, func(t *testing.T) {
			url := atkServer(t, func(w http.ResponseWriter, r *http.Request) {
				readID(r)
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			})
			s := newStateless(t, Config{Name: "x", URL: url, Transport: TransportHTTP})
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := s.Discover(ctx)
			if err == nil || errors.Is(err, ErrNotModern) {
				t.Errorf("Discover that timed out = %v; want a non-verdict error", err)
			}
		})
	}
}
