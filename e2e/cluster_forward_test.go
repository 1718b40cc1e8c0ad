package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// This file checks what a replica passes on when it forwards a request
// for a stdio session to the replica holding it: replies of megabytes,
// indented replies, streams of many events, each whole and with the
// client's id as it wrote it; and a client leaving mid-forward.

// forwardPost POSTs body in session sid straight to the replica at addr
// (no proxy: the test chooses where the request lands) and returns the
// messages of the answer: the JSON body, or the data of each SSE event
// that has some, in order.
func forwardPost(ctx context.Context, t *testing.T, addr, path, sid, version, body string) (contentType string, msgs []string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(sessionPost(ctx, addr, path, sid, version, body))
	if err != nil {
		t.Fatalf("POST to %s: %v", addr, err)
	}
	defer resp.Body.Close()
	contentType = resp.Header.Get("Content-Type")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST to %s: %d %.300s", addr, resp.StatusCode, b)
	}
	if !strings.HasPrefix(contentType, "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("POST to %s: reading the body: %v", addr, err)
		}
		return contentType, []string{string(b)}
	}
	r := sse.NewReader(resp.Body, 32<<20)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return contentType, msgs
		}
		if err != nil {
			t.Fatalf("POST to %s: the stream after %d messages: %v", addr, len(msgs), err)
		}
		if len(ev.Data) > 0 {
			msgs = append(msgs, string(ev.Data))
		}
	}
}

// sessionPost is a POST of body in session sid to the replica at addr.
func sessionPost(ctx context.Context, addr, path, sid, version, body string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", version)
	return req
}

// forwardSession initializes a session of server at version on the
// replica at addr, which then owns it.
func forwardSession(t *testing.T, addr, server, version string) string {
	t.Helper()
	return faultSession(t, "http://"+addr+"/servers/"+server+"/mcp", version)
}

// TestClusterForwardedReplies: a shared stdio session on replica r0,
// called through r1 (forwarded to r0) and on r0 itself: a reply of 4 MiB,
// an indented one, a stream of 2,000 progress notifications before its
// reply. Through the forward each message arrives whole, byte for byte
// what the owner answers its own clients, with the client's id and
// progress token as it wrote them, in sessions of 2025-11-25 (a slow
// reply becomes a stream) and 2025-06-18 (one JSON body but for the
// progress).
func TestClusterForwardedReplies(t *testing.T) {
	// A stream keeps sseReplayEvents events for a reader that lags, and
	// past them drops progress (by design, forwarded or not): every one of
	// the events must arrive here, so they all fit.
	const big, events = 4 << 20, 2000
	_, _, replicas, _ := startCluster(t, 3, map[string]any{"sseReplayEvents": 2 * events})
	owner, via := replicas[0].addr, replicas[1].addr
	for _, version := range []string{"2025-11-25", "2025-06-18"} {
		sid := forwardSession(t, owner, "echo", version)
		calls := []struct {
			name, body string
			want       []string
		}{
			{"4 MiB", `{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"big","arguments":{"bytes":` + strconv.Itoa(big) + `}}}`,
				[]string{`{"jsonrpc":"2.0","id":1.0,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", big) + `"}]}}`}},
			{"indented", `{"jsonrpc":"2.0","id":"x\u00e9","method":"tools/call","params":{"name":"pretty","arguments":{"message":"a\nb\t\u00e9"}}}`,
				[]string{"{\t  \"jsonrpc\": \"2.0\",\t  \"id\": \"x\\u00e9\",\t  \"result\": {\t    \"content\": [\t      {\t        \"type\": \"text\",\t        \"text\": \"a\\nb\\t\\u00e9\"\t      }\t    ]\t  }\t}"}},
			{"2,000 events", `{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"_meta":{"progressToken":"p\u00e9"},"name":"progress","arguments":{"message":"done","count":` + strconv.Itoa(events) + `}}}`,
				progressWant(`"p\u00e9"`, events, `{"jsonrpc":"2.0","id":-0,"result":{"content":[{"type":"text","text":"done"}]}}`)},
		}
		for _, c := range calls {
			for _, at := range []string{via, owner} {
				ctype, got := forwardPost(context.Background(), t, at, "/servers/echo/mcp", sid, version, c.body)
				// Both answers pass through: a JSON body (an older session's
				// replies), a stream (from the first progress notification on).
				if stream := strings.HasPrefix(ctype, "text/event-stream"); len(c.want) > 1 && !stream || version == "2025-06-18" && len(c.want) == 1 && stream {
					t.Errorf("%s, %s, at %s: answered %s", version, c.name, at, ctype)
				}
				if len(got) != len(c.want) {
					t.Errorf("%s, %s, at %s: %d messages (%s), want %d", version, c.name, at, len(got), ctype, len(c.want))
					continue
				}
				for i := range got {
					if got[i] != c.want[i] {
						t.Errorf("%s, %s, at %s (%s): message %d is\n%.300s\nwant\n%.300s", version, c.name, at, ctype, i, got[i], c.want[i])
						break
					}
				}
			}
		}
	}
}

// progressWant is what a progress call of count events with token and
// final reply answers: count notifications, then the reply.
func progressWant(token string, count int, reply string) []string {
	var want []string
	for i := 1; i <= count; i++ {
		want = append(want, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":%d}}`, token, i, count))
	}
	return append(want, reply)
}

// TestClusterForwardClientVanishes: a client calls a slow tool of a
// shared stdio session on r0 through r1 and goes away mid-call. The
// forward is cancelled: r0 sees its client gone and tells the server
// (notifications/cancelled), as for a client of its own; neither replica
// keeps the request in flight.
func TestClusterForwardClientVanishes(t *testing.T) {
	cmd, args, env := testkit.Command(testkit.FakeOptions{Marker: fmt.Sprintf("e2e-cluster-forward-%d", time.Now().UnixNano())}) // of the fake
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	_, _, replicas, _ := startClusterWith(t, 3, map[string]any{"metrics": true}, map[string]serverConfig{"fake": {Command: cmd, Args: args, Env: envMap}})
	owner, via := replicas[0].addr, replicas[1].addr
	const version = "2025-06-18" // the call's answer is one body when it ends: the client leaves before it begins
	sid := forwardSession(t, owner, "fake", version)
	const path = "/servers/fake/mcp"
	calls := func() string {
		_, msgs := forwardPost(context.Background(), t, owner, path, sid, version, `{"jsonrpc":"2.0","id":"calls","method":"tools/call","params":{"name":"calls"}}`)
		return strings.Join(msgs, "\n")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	left := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(sessionPost(ctx, via, path, sid, version,
			`{"jsonrpc":"2.0","id":"gone","method":"tools/call","params":{"name":"slow","arguments":{"ms":599999}}}`))
		if err == nil {
			resp.Body.Close()
		}
		left <- err
	}()
	testkit.WaitFor(t, "the slow call in flight at the server", func() bool {
		c := calls()
		return strings.Contains(c, `599999`) && !strings.Contains(c, `\"cancelled\":[{`)
	})
	cancel()
	if err := testkit.Receive(t, left, "the client's call to end"); err == nil {
		t.Errorf("the call was answered after its client left")
	}
	var last string
	testkit.WaitFor(t, "notifications/cancelled for the call at the server", func() bool {
		last = calls()
		_, cancelled, _ := strings.Cut(last, `\"cancelled\"`)
		return strings.Contains(cancelled, `599999`)
	})
	if inflight, _, _ := strings.Cut(last, `\"cancelled\"`); strings.Contains(inflight, `599999`) {
		t.Errorf("the call is still in flight at the server: %s", last)
	}
	for _, r := range replicas[:2] {
		testkit.WaitFor(t, r.name+" to have no request in flight", func() bool {
			return inflightRequests(t, r.addr) == 0
		})
	}
}

// inflightRequests reads mcpgate_inflight_requests from the replica at
// addr.
func inflightRequests(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics on %s: %v", addr, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "mcpgate_inflight_requests "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("mcpgate_inflight_requests %q", v)
			}
			return n
		}
	}
	t.Fatalf("no mcpgate_inflight_requests on %s", addr)
	return -1
}
