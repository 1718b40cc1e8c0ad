package remote

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// smallBuffers shrinks the socket buffers of every accepted connection, so
// that what a server manages to write is close to what its peer read.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// smallBufferClient is an HTTP client whose connections have small receive
// buffers.
func smallBufferClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(64 << 10)
			}
			return c, err
		},
	}}
}

// TestEndlessMessageNotReadToItsEnd: a reply that never ends, as one SSE
// event or as a JSON body, is read only a little past MaxMessageBytes: the
// stream is aborted, Oversized reported and the request answered with an
// error. Before, the whole event (here, up to the server's cap of 64 MiB)
// was read and discarded.
func TestEndlessMessageNotReadToItsEnd(t *testing.T) {
	const (
		limit     = 256 << 10
		serverCap = 64 << 20
		slack     = 512 << 10 // socket buffers and read-ahead; the old code drained 4 x limit
	)
	var written atomic.Int64
	done := make(chan struct{}, 2)
	f := newFake(t)
	f.ts.Listener = smallBuffers{f.ts.Listener}
	f.request = func(w http.ResponseWriter, r *http.Request, method string, id []byte) bool {
		defer func() { done <- struct{}{} }()
		written.Store(0)
		chunk := []byte(strings.Repeat("x", 16<<10))
		if method == "sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: "))
		} else {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"big":"`))
		}
		for written.Load() < serverCap && r.Context().Err() == nil {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		return true
	}
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP, MaxMessageBytes: limit, HTTPClient: smallBufferClient()})
	initialize(t, c, r)
	for i, method := range []string{"sse", "json"} {
		id := []string{"10", "11"}[i]
		send(t, c, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`"}`)
		if got := r.waitLine(`"id":`+id, `"error"`); !strings.Contains(got, "size limit") {
			t.Errorf("%s: reply %s", method, got)
		}
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Fatalf("%s: the server is still writing (%d bytes)", method, written.Load())
		}
		t.Logf("%s: server wrote %d bytes", method, written.Load())
		if n := written.Load(); n > limit+slack {
			t.Errorf("%s: the server wrote %d bytes before the client went away; limit %d", method, n, limit)
		}
	}
	n := 0
	for _, e := range r.snapshot() {
		if e.kind == "oversized" {
			n++
			if e.size <= limit || len(e.data) > OversizedPrefixLen || !strings.Contains(e.data, "xxxx") {
				t.Errorf("oversized: size %d, prefix %.40q", e.size, e.data)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d Oversized calls, want 2", n)
	}
}
