package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file checks that the upstream standalone stream of a portable
// session is held at one replica at a time: the one serving the client's
// standalone stream (the owner while it lives), never every replica that
// resumed the session to serve a request.

// streamCounter counts, in front of a remote, the standalone GET streams
// its sessions get: how many the remote opened (200), how many it refused
// with 409 (another client holds the session's one stream), and the most
// a session held open at once.
type streamCounter struct {
	next http.Handler

	mu        sync.Mutex
	open      map[string]int // session id -> GET streams open now
	opened    int
	conflicts int
	maxOpen   int
}

func (c *streamCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		c.next.ServeHTTP(w, r)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	held := false
	sw := &statusWriter{ResponseWriter: w, onHeader: func(code int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch code {
		case http.StatusOK:
			held = true
			c.opened++
			c.open[sid]++
			c.maxOpen = max(c.maxOpen, c.open[sid])
		case http.StatusConflict:
			c.conflicts++
		}
	}}
	c.next.ServeHTTP(sw, r)
	c.mu.Lock()
	if held {
		c.open[sid]--
	}
	c.mu.Unlock()
}

// countStreams serves h behind a streamCounter, and returns the server's
// MCP endpoint and the counter.
func countStreams(t *testing.T, h http.Handler) (url string, c *streamCounter) {
	t.Helper()
	c = &streamCounter{next: h, open: map[string]int{}}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", c
}

// counts returns the streams opened, the 409s, and the most streams one
// session held at once.
func (c *streamCounter) counts() (opened, conflicts, maxOpen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.conflicts, c.maxOpen
}

// openNow returns how many standalone streams are open.
func (c *streamCounter) openNow() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.open {
		n += k
	}
	return n
}

// statusWriter tells onHeader the status of the response it writes.
type statusWriter struct {
	http.ResponseWriter
	onHeader func(code int)
	wrote    bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.onHeader(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Three replicas, sessions of a Streamable HTTP remote (the echo fixture,
// which answers a second standalone GET of a session 409, as the
// TypeScript SDK does) opened through the round robin, each with the
// client's standalone stream (forwarded to its owner), then round-robin
// calls in every session: each replica resumes each session, and the
// remote sees one standalone stream per session, the owner's, and no 409.
// Before, every replica that resumed a session opened the session's
// stream too, and retried its 409s for the session's whole life.
func TestClusterStandaloneStreamOncePerSession(t *testing.T) {
	echo := echoserver.NewHandler()
	t.Cleanup(echo.Close)
	url, counter := countStreams(t, echo)
	_, _, replicas, rr := startClusterWith(t, 3, nil, map[string]serverConfig{"counted": {Type: "http", URL: url}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const sessions = 4
	var cs []*clusterClient
	for range sessions {
		c := connectSDK(t, ctx, rr.srv.URL+"/servers/counted/mcp", "2025-06-18")
		cs = append(cs, &clusterClient{server: "counted", c: c, sid: c.cs.ID()})
	}
	// Every session's calls go round all replicas many times over.
	const perSession = 60
	for _, c := range cs {
		if failed, first := c.calls(t, ctx, perSession, "stream"); failed > 0 {
			t.Errorf("session %s: %d of %d calls failed, first: %s", c.sid[:8], failed, perSession, first)
		}
	}
	// Each owner's upstream stream opens after its session's
	// notifications/initialized, on a goroutine of its own.
	testkit.WaitFor(t, "each session's owner to hold its upstream stream", func() bool {
		opened, _, _ := counter.counts()
		return opened >= sessions
	})
	// Another round: a replica that opened a stream it should not have
	// has had the time of a whole round to be refused again.
	for _, c := range cs {
		if failed, first := c.calls(t, ctx, perSession, "again"); failed > 0 {
			t.Errorf("session %s: %d of %d calls failed, first: %s", c.sid[:8], failed, perSession, first)
		}
	}
	opened, conflicts, maxOpen := counter.counts()
	t.Logf("TARGET upstream standalone streams with %d replicas, %d sessions, %d calls each: %d opened, %d refused 409, at most %d open per session",
		len(replicas), sessions, 2*perSession, opened, conflicts, maxOpen)
	if opened != sessions || conflicts != 0 || maxOpen != 1 {
		t.Errorf("the remote opened %d standalone streams and refused %d with 409 (at most %d open per session); want %d (the owners'), no 409, one per session",
			opened, conflicts, maxOpen, sessions)
	}
}

// A session of a Streamable HTTP remote (the Go SDK's server) opened on
// r0, used through all three replicas; the client's standalone stream at
// r0 gets the server's tools/list_changed. r0 is killed (kill -9): the
// client's new standalone GET at r1 gets the server's notifications
// through r1's connection, which takes the upstream stream over once the
// server lets go of r0's, and lets go of it when that GET goes; the
// session never has two upstream streams at once.
func TestClusterStandaloneStreamAfterOwnerKilled(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "notifying", Version: "1"}, nil)
	addTool := func(name string) {
		mcp.AddTool(server, &mcp.Tool{Name: name, Description: "a tool added to notify"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
			})
	}
	addTool("first")
	url, counter := countStreams(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	_, _, replicas, _ := startClusterWith(t, 3, nil, map[string]serverConfig{"notifying": {Type: "http", URL: url}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	at := func(i int) string { return "http://" + replicas[i].addr + "/servers/notifying/mcp" }
	c := &resumingClient{t: t, ctx: ctx, version: "2025-06-18"}
	resp, body := c.post(at(0), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"getstream","version":"1"}}}`)
	if c.sid = resp.Header.Get("Mcp-Session-Id"); c.sid == "" || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize on r0: %d %s", resp.StatusCode, body)
	}
	if resp, body := c.post(at(0), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", resp.StatusCode, body)
	}
	for i := range replicas { // every replica holds the session
		if resp, body := c.post(at(i), `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"first"`) {
			t.Fatalf("tools/list on r%d: %d %s", i, resp.StatusCode, body)
		}
	}

	tool := 0
	// notified opens the client's standalone stream at replica i, waits
	// for a tools/list_changed on it, and returns the stream's body.
	notified := func(i int) io.Closer {
		t.Helper()
		resp := c.request(http.MethodGet, at(i), "", "")
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the client's standalone GET at r%d: %d", i, resp.StatusCode)
		}
		changed := listChanged(sse.NewReader(resp.Body, 0))
		// The server drops a notification no stream of the session
		// reads: it is sent again until one arrives.
		for {
			tool++
			addTool(fmt.Sprintf("added-%d", tool))
			select {
			case <-changed:
				return resp.Body
			case <-time.After(500 * time.Millisecond):
			case <-ctx.Done():
				t.Fatalf("no tools/list_changed on the client's standalone stream at r%d", i)
			}
		}
	}
	notified(0)
	replicas[0].kill9(t)
	stream := notified(1)
	opened, conflicts, maxOpen := counter.counts()
	t.Logf("TARGET owner killed: upstream standalone streams %d opened, %d refused 409, at most %d open at once", opened, conflicts, maxOpen)
	// The client's stream at r1 goes: r1 lets go of the upstream one,
	// and nobody else holds it (before, each replica that had resumed
	// the session held it or kept asking for it).
	stream.Close()
	testkit.WaitFor(t, "the upstream standalone stream to close with the client's", func() bool { return counter.openNow() == 0 })
	if opened != 2 || maxOpen != 1 {
		t.Errorf("the remote opened %d standalone streams, at most %d at once; want 2 (r0's, then r1's), one at a time", opened, maxOpen)
	}
}

// listChanged reads an SSE stream, telling the channel it returns of each
// notifications/tools/list_changed.
func listChanged(events *sse.Reader) <-chan struct{} {
	changed := make(chan struct{}, 1)
	go func() {
		for {
			ev, err := events.Next()
			if err != nil {
				return
			}
			if bytes.Contains(ev.Data, []byte(`"notifications/tools/list_changed"`)) {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	return changed
}
