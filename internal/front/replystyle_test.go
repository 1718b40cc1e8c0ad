package front

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestReplyStyle: a reply that is the first message for its POST is one
// JSON body in every protocol version; a related message first makes it an
// SSE stream (opened by a priming event from 2025-11-25 on). It used to be
// an SSE stream with a priming event for every 2025-11-25 POST, however
// quick the reply.
func TestReplyStyle(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run(version, func(t *testing.T) {
			b := newFakeBackend()
			b.version = version
			_, srv := testServer(t, b, Config{})
			sid := initSession(t, srv)

			resp, body := do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{}}`,
				"Mcp-Session-Id", sid, "Mcp-Protocol-Version", version)
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" || body != `{"jsonrpc":"2.0","id":"q","result":{}}` {
				t.Errorf("quick reply: %s %q, want one JSON body", ct, body)
			}

			resp, body = do(t, srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":"p","method":"progress","params":{}}`,
				"Mcp-Session-Id", sid, "Mcp-Protocol-Version", version)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.Contains(body, "notifications/progress") || !strings.Contains(body, `"id":"p"`) {
				t.Errorf("reply after progress: %s %q, want an SSE stream", ct, body)
			}
			if primed := strings.Contains(body, "retry: "); primed != (version >= protocol.Version20251125) {
				t.Errorf("reply after progress starts with %q: priming event %v, want %v", body[:min(len(body), 20)], primed, version >= protocol.Version20251125)
			}
		})
	}
}

// TestSlowReplyStyle: from 2025-11-25 on, a reply slower than ReplyWait
// comes on a resumable SSE stream, opened by a priming event before the
// reply exists; older sessions, which cannot resume, wait for one JSON body.
func TestSlowReplyStyle(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2025-06-18"} {
		t.Run(version, func(t *testing.T) {
			b := newFakeBackend()
			b.version = version
			_, srv := testServer(t, b, Config{ReplyWait: time.Millisecond})
			sid := initSession(t, srv)
			conn := testkit.Receive(t, b.conns, "the session's conn")

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+mcpPath, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"hold","params":{}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", version)
			type result struct {
				resp *http.Response
				err  error
			}
			got := make(chan result, 1)
			go func() {
				resp, err := srv.Client().Do(req)
				got <- result{resp, err}
			}()
			testkit.Receive(t, conn.held, "the request to reach the server")
			var r result
			if version >= protocol.Version20251125 {
				// The headers and the priming event come while the
				// request is still held.
				r = testkit.Receive(t, got, "the SSE stream to open before the reply")
				conn.release()
			} else {
				select {
				case r = <-got:
					t.Fatalf("a %s reply was answered before the server replied: %v", version, r.resp.Header)
				case <-time.After(50 * time.Millisecond): // 50 ReplyWaits: the JSON waiter must still wait
				}
				conn.release()
				r = testkit.Receive(t, got, "the JSON reply")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.resp.Body.Close()
			body, _ := io.ReadAll(r.resp.Body)
			ct := r.resp.Header.Get("Content-Type")
			if version >= protocol.Version20251125 {
				if ct != "text/event-stream" || !strings.Contains(string(body), "retry: ") || !strings.Contains(string(body), `"released":true`) {
					t.Errorf("slow %s reply: %s %q, want a primed SSE stream with the reply", version, ct, body)
				}
			} else if ct != "application/json" || string(body) != `{"jsonrpc":"2.0","id":9,"result":{"released":true}}` {
				t.Errorf("slow %s reply: %s %q, want one JSON body", version, ct, body)
			}
		})
	}
}

// TestLargeJSONReply: a reply too big for net/http's buffer is still one
// JSON body, announced by its Content-Length rather than sent chunked, and
// arrives byte for byte; so does a batch of them (2025-03-26).
func TestLargeJSONReply(t *testing.T) {
	big := `{"text":"` + strings.Repeat("x", 300<<10) + `"}`
	for _, version := range []string{"2025-11-25", "2025-03-26"} {
		t.Run(version, func(t *testing.T) {
			b := newFakeBackend()
			b.version = version
			_, srv := testServer(t, b, Config{})
			sid := initSession(t, srv)
			body, want := `{"jsonrpc":"2.0","id":"big","method":"echoParams","params":`+big+`}`, `{"jsonrpc":"2.0","id":"big","result":`+big+`}`
			if version == protocol.Version20250326 {
				body, want = "["+body+","+strings.Replace(body, `"big"`, `2`, 1)+"]", "["+want+","+strings.Replace(want, `"big"`, `2`, 1)+"]"
			}
			resp, got := do(t, srv, http.MethodPost, mcpPath, body, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", version)
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if resp.ContentLength != int64(len(want)) || len(resp.TransferEncoding) != 0 {
				t.Errorf("Content-Length %d, Transfer-Encoding %v; want %d and none", resp.ContentLength, resp.TransferEncoding, len(want))
			}
			if got != want {
				t.Errorf("body of %d bytes differs from the %d expected", len(got), len(want))
			}
		})
	}
}
