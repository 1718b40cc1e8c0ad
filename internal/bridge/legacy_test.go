package bridge

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// legacyUpstream is a 2024-11-05 HTTP+SSE server: each GET /sse is a new
// session; requests POSTed to /message?sid=N are answered on stream N,
// except "hang", which never is.
type legacyUpstream struct {
	mu      sync.Mutex
	streams map[int]chan string
	drops   map[int]chan struct{}
	posts   []string // "sid method"
	posted  chan struct{}
}

func newLegacyUpstream() *legacyUpstream {
	return &legacyUpstream{streams: map[int]chan string{}, drops: map[int]chan struct{}{}, posted: make(chan struct{}, 64)}
}

func (u *legacyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/sse" {
		u.mu.Lock()
		sid := len(u.streams) + 1
		events, drop := make(chan string, 16), make(chan struct{})
		u.streams[sid], u.drops[sid] = events, drop
		u.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: /message?sid=%d\n\n", sid)
		w.(http.Flusher).Flush()
		for {
			select {
			case ev := <-events:
				io.WriteString(w, ev)
				w.(http.Flusher).Flush()
			case <-drop:
				return
			case <-r.Context().Done():
				return
			}
		}
	}
	if r.Method != http.MethodPost || r.URL.Path != "/message" {
		http.Error(w, "no", http.StatusMethodNotAllowed) // also the POST of auto's probe
		return
	}
	var sid int
	fmt.Sscan(r.URL.Query().Get("sid"), &sid)
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Parse(body)
	u.mu.Lock()
	events := u.streams[sid]
	u.posts = append(u.posts, fmt.Sprintf("%d %s", sid, msg.MethodName()))
	u.mu.Unlock()
	u.posted <- struct{}{}
	if err != nil || events == nil {
		http.Error(w, "no session", http.StatusNotFound)
		return
	}
	if msg.Kind == jsonrpc.KindRequest && !msg.MethodIs("hang") {
		reply := jsonrpc.Response(msg.Bytes(msg.ID), fmt.Appendf(nil, `{"sid":%d,"protocolVersion":"2024-11-05"}`, sid))
		events <- "event: message\ndata: " + string(reply) + "\n\n"
	}
	w.WriteHeader(http.StatusAccepted)
}

// waitPost waits until the server got a POST "sid method".
func (u *legacyUpstream) waitPost(t *testing.T, want string) {
	t.Helper()
	for {
		u.mu.Lock()
		for _, p := range u.posts {
			if p == want {
				u.mu.Unlock()
				return
			}
		}
		u.mu.Unlock()
		select {
		case <-u.posted:
		case <-t.Context().Done():
			t.Fatalf("no POST %q", want)
		}
	}
}

// TestBridgeLegacyStreamLoss: when the legacy stream drops, the request in
// flight gets an error line; the new session gets the client's initialize
// replayed (its reply not written) and then serves the client's requests.
func TestBridgeLegacyStreamLoss(t *testing.T) {
	u := newLegacyUpstream()
	ts := httptest.NewServer(u)
	defer ts.Close()
	in, out, done := runBridge(t, t.Context(), remote.Config{URL: ts.URL + "/sse"})

	io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`+"\n")
	out.wait(t, `"id":1`, `"sid":1`)
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(in, `{"jsonrpc":"2.0","id":5,"method":"hang"}`+"\n")
	u.waitPost(t, "1 hang")

	u.mu.Lock()
	close(u.drops[1])
	u.mu.Unlock()
	if got := out.wait(t, `"id":5`); !strings.Contains(got, "connection to the remote server lost") {
		t.Errorf("pending request answered %s", got)
	}
	u.waitPost(t, "2 initialize")
	u.waitPost(t, "2 notifications/initialized")
	io.WriteString(in, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`+"\n")
	out.wait(t, `"id":6`, `"sid":2`)
	in.Close()
	if err := testkit.Receive(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, l := range out.lines() {
		if strings.Contains(l, "mcpgate-bridge-init") {
			t.Errorf("the replayed initialize's reply reached the client: %s", l)
		}
	}
}
