package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call in flight on a resumable stream when its replica is killed -9:
// the client (raw HTTP, 2025-11-25) resumes the stream with Last-Event-ID
// through the round-robin proxy, lands on another replica, and gets
// exactly one answer to its call, an error with its id byte for byte,
// never none and never two; its portable session goes on.
func TestClusterStreamResumedAfterCrash(t *testing.T) {
	redis, calls, replicas, addrs, rr := startHoldingCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const path = "/servers/remote/mcp"
	c := &resumingClient{t: t, ctx: ctx, version: "2025-11-25"}

	resp, body := c.post(rr.srv.URL+path, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	c.sid = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || c.sid == "" || !strings.Contains(body, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	if resp, body := c.post(rr.srv.URL+path, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	owner, _ := rr.owner(c.sid)

	// The slow call goes to the session's replica; its reply, slower than
	// replyWait, becomes a stream whose priming event's id the client keeps.
	const id = `12345678901234567890123`
	stream := c.open(http.MethodPost, "http://"+addrs[owner]+path, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"message":"slow"}}}`, "")
	ev, err := stream.Next()
	if err != nil || ev.ID == "" || len(ev.Data) != 0 {
		t.Fatalf("the call's stream: %+v %v, want a priming event", ev, err)
	}
	last := ev.ID
	if s, _, ok := session.ParseEventID(last); !ok || s>>32 == 0 {
		t.Errorf("event id %q: its stream number does not carry its replica", last)
	}
	testkit.Receive(t, calls, "the slow call at the remote")
	if w := streamWriter(t, ctx, redis.Addr); w != fmt.Sprintf("r%d", owner) {
		t.Fatalf("the stream's writer in Redis: %q, want r%d", w, owner)
	}

	replicas[owner].kill9(t)
	t.Logf("killed r%d (kill -9) with the call in flight on its stream %s", owner, last)
	for {
		if _, err := stream.Next(); err != nil {
			break // the connection died with the replica
		}
	}

	resumed := c.open(http.MethodGet, rr.srv.URL+path, "", last)
	var answers []string
	for {
		ev, err := resumed.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the resumed stream: %v", err)
		}
		if len(ev.Data) > 0 {
			answers = append(answers, string(ev.Data))
		}
	}
	t.Logf("TARGET in flight at the crash: %d answers after the resume: %q", len(answers), answers)
	if len(answers) != 1 || !strings.Contains(answers[0], `"id":`+id+`,`) || !strings.Contains(answers[0], "the replica serving this request stopped") {
		t.Fatalf("answers after the resume: %q, want exactly one error for id %s", answers, id)
	}

	resp, body = c.post(rr.srv.URL+path, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"after"}}}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"text":"after"`) {
		t.Fatalf("a call after the resume: %d %s", resp.StatusCode, body)
	}
}

// The same with the Go SDK as the client (2025-11-25): its call lands on
// some replica, which is killed -9 once its stream is in Redis; the SDK
// resumes the stream by itself with Last-Event-ID, on another replica,
// and its CallTool returns the one error, neither hanging nor failing the
// session, which goes on.
func TestClusterStreamResumedAfterCrashGoSDK(t *testing.T) {
	redis, calls, replicas, _, rr := startHoldingCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The SDK's HTTP client tells when a POST's stream has brought a whole
	// event with an id: from then on the SDK can resume it.
	primed := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-streams", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: rr.srv.URL + "/servers/remote/mcp",
		HTTPClient: &http.Client{Transport: primingWatch{base: http.DefaultTransport, primed: primed}}}
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	c := &sdkClient{cs: cs}
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "slow"}})
		done <- outcome{res, err}
	}()
	testkit.Receive(t, calls, "the slow call at the remote")
	testkit.Receive(t, primed, "the call's stream primed at the client")
	writer := streamWriter(t, ctx, redis.Addr)
	killed := false
	for _, r := range replicas {
		if r.name == writer {
			r.kill9(t)
			killed = true
		}
	}
	if !killed {
		t.Fatalf("the stream's writer in Redis: %q, not a replica", writer)
	}
	t.Logf("killed %s (kill -9) with the call in flight on its stream", writer)
	got := testkit.Receive(t, done, "CallTool to return")
	t.Logf("TARGET in flight at the crash (Go SDK): %v %v", got.res, got.err)
	if got.err == nil || !strings.Contains(got.err.Error(), "the replica serving this request stopped") {
		t.Fatalf("CallTool: %+v, %v; want the error of a lost reply", got.res, got.err)
	}
	if ok, what := (&clusterClient{c: c}).call(ctx, "after"); !ok {
		t.Fatalf("a call after the resume: %s", what)
	}
}

// primingWatch is an http.RoundTripper that signals primed once the SSE
// answer of a POST has brought a whole event with an id to its reader.
type primingWatch struct {
	base   http.RoundTripper
	primed chan<- struct{}
}

func (p primingWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost && resp.Header.Get("Content-Type") == "text/event-stream" {
		resp.Body = &idWatch{ReadCloser: resp.Body, primed: p.primed}
	}
	return resp, err
}

// idWatch passes a body through, and signals once an id field and the
// blank line ending its event went by.
type idWatch struct {
	io.ReadCloser
	primed chan<- struct{}
	seen   []byte
	done   bool
}

func (w *idWatch) Read(b []byte) (int, error) {
	n, err := w.ReadCloser.Read(b)
	if !w.done {
		w.seen = append(w.seen, b[:n]...)
		if i := bytes.Index(w.seen, []byte("id: ")); i >= 0 && bytes.Contains(w.seen[i:], []byte("\n\n")) {
			w.done, w.seen = true, nil
			select {
			case w.primed <- struct{}{}:
			default: // nobody waits for this one
			}
		} else if len(w.seen) > 64<<10 {
			w.done, w.seen = true, nil // a stream without ids
		}
	}
	return n, err
}

// startHoldingCluster starts redis, a remote that holds calls of the
// message "slow" (announced on calls) and three replicas serving it as
// server "remote", behind a round-robin proxy.
func startHoldingCluster(t *testing.T) (redis *testkit.RedisServer, calls <-chan struct{}, replicas []*gatewayReplica, addrs []string, rr *roundRobin) {
	t.Helper()
	redis = testkit.StartRedis(t)
	remote, calls := holdingRemote(t)
	servers := map[string]serverConfig{"remote": {Type: "http", URL: remote + "/mcp"}}
	gw := map[string]any{"sealKeyFile": sealKeyFile(t)}
	for i := range 3 {
		addr := testkit.FreeAddr(t)
		addrs = append(addrs, addr)
		replicas = append(replicas, startReplica(t, fmt.Sprintf("r%d", i), addr, servers, gw, redis.Addr))
	}
	return redis, calls, replicas, addrs, startRoundRobin(t, addrs)
}

// streamWriter waits until Redis holds the record of one resumable
// stream, and returns the replica that writes it.
func streamWriter(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	var writer string
	testkit.WaitFor(t, "the stream recorded in Redis", func() bool {
		keys, _, err := rdb.Scan(ctx, 0, "mcpgate:s:*:sm:*", 100).Result()
		if err != nil || len(keys) != 1 {
			return false
		}
		writer = rdb.HGet(ctx, keys[0], "w").Val()
		return writer != ""
	})
	return writer
}

// holdingRemote serves the echo server over Streamable HTTP, but holds a
// call of the message "slow" until its client goes; each such call is
// announced on calls.
func holdingRemote(t *testing.T) (url string, calls <-chan struct{}) {
	t.Helper()
	echo := echoserver.NewHandler()
	held := make(chan struct{}, 8)
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if bytes.Contains(body, []byte(`"message":"slow"`)) {
			held <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		echo.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(stop)
		echo.Close()
		srv.Close()
	})
	return srv.URL, held
}

// resumingClient speaks Streamable HTTP by hand, one connection per request.
type resumingClient struct {
	t       *testing.T
	ctx     context.Context
	version string
	sid     string
	http    http.Client
}

func (c *resumingClient) request(method, url, body, lastEventID string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.ctx, method, url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Close = true
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

// post sends one POST and reads its whole answer.
func (c *resumingClient) post(url, body string) (*http.Response, string) {
	c.t.Helper()
	resp := c.request(http.MethodPost, url, body, "")
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("POST %s: %v", url, err)
	}
	return resp, string(b)
}

// open sends a request answered by an SSE stream, and returns its reader.
func (c *resumingClient) open(method, url, body, lastEventID string) *sse.Reader {
	c.t.Helper()
	resp := c.request(method, url, body, lastEventID)
	c.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("%s %s: %d %q, want an SSE stream: %s", method, url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return sse.NewReader(resp.Body, 0)
}
