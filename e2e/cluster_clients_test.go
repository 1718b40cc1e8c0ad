package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file proves the cluster with the clients users run, every request
// through the round-robin proxy with keep-alives off: the official
// TypeScript SDK over Streamable HTTP (with progress and a resumed stream)
// and over legacy HTTP+SSE, and the Go SDK in 2026-07-28. None of these
// clients initializes again after a 404 (PEERS.md: Claude's do not), so
// each test also checks that no replica answered 404 for a session of a
// live replica.

// clusterTSClients is how many TypeScript clients share a server at once.
const clusterTSClients = 6

// everythingServers are server-everything as a shared stdio server
// (owner-bound: its sessions are forwarded to the replica running the
// process) and as a Streamable HTTP remote (portable: any replica serves
// its sessions), for startClusterWith.
func everythingServers(t *testing.T) map[string]serverConfig {
	t.Helper()
	remote := startServerEverything(t, "streamableHttp")
	return map[string]serverConfig{
		"everything":        {Command: node22, Args: []string{serverEverything, "stdio"}},
		"everything-remote": {Type: "http", URL: "http://" + remote + "/mcp"},
	}
}

// checkNoNotFound returns a check, for the end of a test, that no replica
// answered 404 since it was called: every replica lives, so every session
// was someone's to serve.
func checkNoNotFound(t *testing.T, rr *roundRobin) func() {
	t.Helper()
	before := len(rr.notFounds())
	return func() {
		t.Helper()
		for _, r := range rr.notFounds()[before:] {
			t.Errorf("404 for a session of a live replica (a client that never initializes again is stuck): %s", r)
		}
	}
}

// TestClusterTypeScriptStreamable has concurrent TypeScript SDK clients
// use server-everything through three replicas: initialize, tools/list,
// echo, get-sum and a long-running call with progress, each request on
// the next replica. The stdio server's sessions are forwarded to their
// owner; the remote's are resumed wherever a request lands.
func TestClusterTypeScriptStreamable(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, everythingClientScript)
	_, _, _, rr := startClusterWith(t, 3, nil, everythingServers(t))
	for _, server := range []string{"everything", "everything-remote"} {
		t.Run(server, func(t *testing.T) {
			defer checkNoNotFound(t, rr)()
			runEverythingClientN(t, script, rr.srv.URL+"/servers/"+server+"/mcp", clusterTSClients)
		})
	}
}

// TestClusterTypeScriptSampling has TypeScript SDK clients answer the
// sampling requests server-everything sends during their calls: each
// answer is a POST of its own that lands on another replica than the
// call's; it reaches the owner of a stdio session (forwarded), and the
// replica that asked in a remote's portable session (whose server
// request ids name it). The shared process has one client at a time: it
// routes a server request only when one session has requests at it.
func TestClusterTypeScriptSampling(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, "sampling_client.mjs")
	_, _, _, rr := startClusterWith(t, 3, nil, everythingServers(t))
	for _, tc := range []struct {
		server  string
		clients int
	}{{"everything", 1}, {"everything-remote", 4}} {
		t.Run(tc.server, func(t *testing.T) {
			defer checkNoNotFound(t, rr)()
			out, err := runNode(t, peersDir, tsClientTimeout, script, "--url", rr.srv.URL+"/servers/"+tc.server+"/mcp", "--clients", strconv.Itoa(tc.clients))
			var sum struct {
				OK      bool `json:"ok"`
				Results []struct {
					Client  int      `json:"client"`
					Sampled int      `json:"sampled"`
					OK      bool     `json:"ok"`
					Errors  []string `json:"errors"`
				} `json:"results"`
			}
			if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
				t.Fatalf("client script (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
			}
			for _, r := range sum.Results {
				for _, e := range r.Errors {
					t.Errorf("client %d: %s", r.Client, e)
				}
				if !r.OK || r.Sampled != 3 {
					t.Errorf("client %d: ok=%v, %d sampling requests answered, want 3", r.Client, r.OK, r.Sampled)
				}
			}
			if err != nil || !sum.OK || len(sum.Results) != tc.clients {
				t.Fatalf("client script: %v; ok=%v, %d results", err, sum.OK, len(sum.Results))
			}
		})
	}
}

// TestClusterTypeScriptLegacySSE has concurrent clients of the SDK's
// legacy SSEClientTransport (2024-11-05) use server-everything: each GET
// /sse stays on one replica, and its POSTs to /messages land on the
// others, which forward them to it (a legacy session is owner-bound, of a
// stdio server or a remote); every reply and progress notification must
// arrive on the client's own stream.
func TestClusterTypeScriptLegacySSE(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, everythingClientScript)
	_, _, _, rr := startClusterWith(t, 3, nil, everythingServers(t))
	for _, server := range []string{"everything", "everything-remote"} {
		t.Run(server, func(t *testing.T) {
			defer checkNoNotFound(t, rr)()
			runEverythingClientN(t, script, rr.srv.URL+"/servers/"+server+"/sse", clusterTSClients, "--transport", "sse")
		})
	}
}

// TestClusterTypeScriptResume breaks the SSE stream of a long-running call
// after its first progress notification, in the proxy: the TypeScript SDK
// resumes it with a GET and Last-Event-ID, which lands on another replica,
// and must get the rest of the progress and the result, once each.
func TestClusterTypeScriptResume(t *testing.T) {
	requirePeers(t, node22, serverEverything)
	script := installScript(t, "resume_client.mjs")
	_, _, _, rr := startClusterWith(t, 3, nil, everythingServers(t))
	for _, server := range []string{"everything", "everything-remote"} {
		t.Run(server, func(t *testing.T) {
			defer checkNoNotFound(t, rr)()
			var cuts, resumes atomic.Int64
			cuts.Store(1)
			wrap := breakFirstProgress(&cuts, &resumes)
			rr.wrap.Store(&wrap)
			defer rr.wrap.Store(nil)
			out, err := runNode(t, peersDir, tsClientTimeout, script, "--url", rr.srv.URL+"/servers/"+server+"/mcp", "--steps", "4")
			var sum struct {
				OK          bool     `json:"ok"`
				Disconnects int      `json:"disconnects"`
				Result      string   `json:"result"`
				Errors      []string `json:"errors"`
				Progress    []struct{ Progress, Total float64 }
			}
			if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
				t.Fatalf("client script (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
			}
			for _, e := range sum.Errors {
				t.Errorf("client: %s", e)
			}
			if cuts.Load() != 0 {
				t.Fatalf("the proxy broke no stream: the call never sent progress on an SSE stream\n%s", out)
			}
			if resumes.Load() == 0 || sum.Disconnects == 0 {
				t.Errorf("the client did not resume the broken stream (%d GETs with Last-Event-ID, %d disconnects seen)", resumes.Load(), sum.Disconnects)
			}
			if err != nil || !sum.OK || len(sum.Progress) != 4 {
				t.Errorf("client script: %v; ok=%v, %d progress notifications, result %q", err, sum.OK, len(sum.Progress), sum.Result)
			}
		})
	}
}

// breakFirstProgress returns a proxy wrapper that aborts the response of a
// POST calling the long-running operation right after its first progress
// notification reached the client, while cuts is above zero (it counts
// down), and counts the GETs with Last-Event-ID in resumes.
func breakFirstProgress(cuts, resumes *atomic.Int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
				resumes.Add(1)
			}
			if r.Method != http.MethodPost || cuts.Load() <= 0 {
				next.ServeHTTP(w, r)
				return
			}
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if !bytes.Contains(body, []byte(`"trigger-long-running-operation"`)) {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(&breakingWriter{ResponseWriter: w, cuts: cuts}, r)
		})
	}
}

// breakingWriter passes a response through until a flush follows a
// progress notification: then it aborts the connection (the server's
// recovery of http.ErrAbortHandler closes it), as a network break would.
type breakingWriter struct {
	http.ResponseWriter
	cuts     *atomic.Int64
	progress bool
}

func (b *breakingWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("notifications/progress")) {
		b.progress = true
	}
	return b.ResponseWriter.Write(p)
}

func (b *breakingWriter) Flush() {
	http.NewResponseController(b.ResponseWriter).Flush()
	if b.progress && b.cuts.Add(-1) >= 0 {
		panic(http.ErrAbortHandler)
	}
}

// TestClusterGoSDKStateless has the Go SDK speak 2026-07-28 through three
// replicas: every request is self-contained and lands on the next
// replica. A call answered input_required (sampling) is retried with the
// answer on another replica: for the conformance server, which speaks the
// revision itself, the server's own requestState goes with the retry; for
// the same server pinned to the session eras, the gateway translates, and
// the request waits parked on a translation process of the first replica
// for its retry.
func TestClusterGoSDKStateless(t *testing.T) {
	requirePeers(t, everythingServer)
	_, _, _, rr := startClusterWith(t, 3, nil, map[string]serverConfig{
		"conf":        {Command: everythingServer},
		"conf-legacy": {Command: everythingServer, Protocol: "legacy"},
	})
	for _, tc := range []struct{ server, tool string }{
		{"conf", "test_input_required_result_sampling"},
		{"conf-legacy", "test_sampling"},
	} {
		t.Run(tc.server, func(t *testing.T) {
			defer checkNoNotFound(t, rr)()
			ctx, cancel := context.WithTimeout(context.Background(), 2*tsClientTimeout)
			defer cancel()
			var sampled atomic.Int64
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e-cluster", Version: "1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					sampled.Add(1)
					return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e", Content: &mcp.TextContent{Text: "sampled by e2e"}}, nil
				},
			})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: rr.srv.URL + "/servers/" + tc.server + "/mcp", DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != "2026-07-28" {
				t.Errorf("negotiated %q, want 2026-07-28", got)
			}
			// Three rounds: with three replicas, the retry of each lands
			// on a replica other than its call's.
			const rounds = 3
			for i := range rounds {
				tools, err := cs.ListTools(ctx, nil)
				if err != nil || len(tools.Tools) == 0 {
					t.Fatalf("round %d: tools/list: %v", i, err)
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
				if err != nil || res.IsError || len(res.Content) == 0 {
					t.Fatalf("round %d: test_simple_text: %v %+v", i, err, res)
				}
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"prompt": "hello"}})
				if err != nil || res.IsError {
					t.Fatalf("round %d: %s: %v %+v", i, tc.tool, err, res)
				}
				text := ""
				for _, c := range res.Content {
					text += textContent(c)
				}
				if !strings.Contains(text, "sampled by e2e") {
					t.Errorf("round %d: %s: result %q, want the client's sampling answer in it", i, tc.tool, text)
				}
			}
			if n := sampled.Load(); n != rounds {
				t.Errorf("%d sampling requests, want %d (one per call)", n, rounds)
			}
		})
	}
}

// TestClusterTypeScriptReverseBridge has TypeScript SDK clients of the
// session eras use the Go SDK's conformance server pinned to 2026-07-28
// through three replicas, as a stdio server (owner-bound: forwarded) and
// as a Streamable HTTP remote (portable: the reverse bridge's session is
// built again from its handoff state wherever a request lands): their
// initialize answered from server/discover, input_required turned into
// server requests on their own streams, logging levels kept, and
// tools/list_changed delivered. The remote's sessions leave out the
// logging step: a portable session's logging/setLevel is kept by the
// replica it lands on only, so the logs of a call landing on another are
// not sent (a known gap: the level is not in the handoff state, nor
// shared with the replicas that resumed the session).
func TestClusterTypeScriptReverseBridge(t *testing.T) {
	requirePeers(t, node22, everythingServer)
	script := installScript(t, "reverse_client.mjs")
	_, _, _, rr := startClusterWith(t, 3, nil, map[string]serverConfig{
		"modern":        {Command: everythingServer, Protocol: "2026-07-28"},
		"modern-remote": {Type: "http", URL: startEverythingHTTP(t, true), Protocol: "2026-07-28"},
	})
	for _, server := range []string{"modern", "modern-remote"} {
		t.Run(server, func(t *testing.T) {
			defer checkNoNotFound(t, rr)()
			runReverseClient(t, script, rr.srv.URL+"/servers/"+server+"/mcp", server == "modern")
		})
	}
}

// TestClusterGoSDKListen has the Go SDK in 2026-07-28 hold
// subscriptions/listen on one replica while its calls land on the others:
// a tool change the remote conformance server makes on a call through
// another replica reaches the listen as tools/list_changed.
func TestClusterGoSDKListen(t *testing.T) {
	requirePeers(t, everythingServer)
	_, _, _, rr := startClusterWith(t, 3, nil, map[string]serverConfig{
		"conf-remote": {Type: "http", URL: startEverythingHTTP(t, true)},
	})
	defer checkNoNotFound(t, rr)()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := connectSDK(t, ctx, rr.srv.URL+"/servers/conf-remote/mcp", "2026-07-28")
	for i := range 3 {
		c.drain()
		res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_trigger_tool_change"})
		if err != nil || res.IsError {
			t.Fatalf("round %d: test_trigger_tool_change: %v %+v", i, err, res)
		}
		if !c.waitToolsChanged(30 * time.Second) {
			t.Fatalf("round %d: no tools/list_changed on the listen within 30s", i)
		}
	}
}
