package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clusterClient is one Go SDK client session through the round-robin
// proxy.
type clusterClient struct {
	server string
	c      *sdkClient
	sid    string
	owner  int // the replica that answered its initialize
}

// portable reports whether the client's session survives its replica:
// the remote server's sessions do; stdio servers' live in their process.
func (c *clusterClient) portable() bool { return c.server == "remote" }

// startCluster starts redis, a Streamable HTTP remote and n replicas
// serving an echo server as shared stdio, as per-session stdio and the
// remote, behind a round-robin proxy; gateway adds keys to each
// replica's gateway block.
func startCluster(t testing.TB, n int, gateway map[string]any) (*testkit.RedisServer, *echoserver.Handler, []*gatewayReplica, *roundRobin) {
	t.Helper()
	return startClusterWith(t, n, gateway, nil)
}

// startClusterWith is startCluster with more servers: extra are added to
// the echo servers and the remote (a name of theirs replaces one).
func startClusterWith(t testing.TB, n int, gateway map[string]any, extra map[string]serverConfig) (*testkit.RedisServer, *echoserver.Handler, []*gatewayReplica, *roundRobin) {
	t.Helper()
	redis := testkit.StartRedis(t)
	echo := echoBinary(t)
	remote := echoserver.NewHandler()
	rsrv := httptest.NewServer(remote)
	t.Cleanup(func() {
		remote.Close()
		rsrv.Close()
	})
	servers := map[string]serverConfig{
		"echo":         {Command: echo},
		"echo-session": {Command: echo, Isolation: "session"},
		"remote":       {Type: "http", URL: rsrv.URL + "/mcp"},
	}
	for name, sc := range extra {
		servers[name] = sc
	}
	gw := map[string]any{"sealKeyFile": sealKeyFile(t)}
	for k, v := range gateway {
		gw[k] = v
	}
	var replicas []*gatewayReplica
	var addrs []string
	for i := range n {
		addr := testkit.FreeAddr(t)
		addrs = append(addrs, addr)
		replicas = append(replicas, startReplica(t, fmt.Sprintf("r%d", i), addr, servers, gw, redis.Addr))
	}
	return redis, remote, replicas, startRoundRobin(t, addrs)
}

// connectAll opens perServer sessions on each server through the proxy.
func connectAll(t *testing.T, ctx context.Context, rr *roundRobin, perServer int) []*clusterClient {
	t.Helper()
	var clients []*clusterClient
	for _, server := range []string{"echo", "echo-session", "remote"} {
		for range perServer {
			c := connectSDK(t, ctx, rr.srv.URL+"/servers/"+server+"/mcp", "2025-06-18")
			sid := c.cs.ID()
			owner, ok := rr.owner(sid)
			if !ok {
				t.Fatalf("%s: the proxy saw no initialize answered with session %q", server, sid)
			}
			clients = append(clients, &clusterClient{server: server, c: c, sid: sid, owner: owner})
		}
	}
	return clients
}

// call makes one echo call of msg: its outcome, or the transport's error
// (a session the gateway no longer knows is an HTTP 404, not a JSON-RPC
// error).
func (c *clusterClient) call(ctx context.Context, msg string) (ok bool, what string) {
	res, err := c.c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	if err != nil {
		return false, err.Error()
	}
	var text []string
	for _, ct := range res.Content {
		text = append(text, textContent(ct))
	}
	got := strings.Join(text, "\n")
	return !res.IsError && got == msg, got
}

// calls makes n echo calls in c's session and returns how many failed and
// the first failure.
func (c *clusterClient) calls(t *testing.T, ctx context.Context, n int, tag string) (failed int, first string) {
	t.Helper()
	for i := range n {
		msg := fmt.Sprintf("%s-%s-%d", tag, c.sid[:8], i)
		if ok, what := c.call(ctx, msg); !ok {
			if failed == 0 {
				first = what
			}
			failed++
		}
	}
	return failed, first
}

// clusterLoad calls echo in sessions without a pause, each session on
// a goroutine of its own, until end, counting the calls that fail.
type clusterLoad struct {
	stop            chan struct{}
	wg              sync.WaitGroup
	calls, failures atomic.Int64
	first           atomic.Value // the first failure, "server: what"
}

// start loads sessions cs, with messages tagged tag.
func (l *clusterLoad) start(ctx context.Context, tag string, cs []*clusterClient) {
	for _, c := range cs {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				l.calls.Add(1)
				if ok, what := c.call(ctx, fmt.Sprintf("%s-%s-%d", tag, c.sid[:8], i)); !ok {
					l.failures.Add(1)
					l.first.CompareAndSwap(nil, c.server+": "+what)
				}
			}
		})
	}
}

// end stops the load and returns its counts and first failure.
func (l *clusterLoad) end() (calls, failures int64, first any) {
	close(l.stop)
	l.wg.Wait()
	return l.calls.Load(), l.failures.Load(), l.first.Load()
}

// Three replicas behind round robin with keep-alives off: every call of
// every session is answered, whichever replica it lands on (owner-bound
// sessions are forwarded to their owner, portable ones resumed). Then
// kill -9 of one replica: its portable sessions go on with no
// re-initialize, its owner-bound ones get 404 at once, and the other
// replicas' sessions see no error. Then Redis is stopped and started:
// the sessions go on.
func TestClusterRoundRobinAndCrash(t *testing.T) {
	redis, remote, replicas, rr := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	clients := connectAll(t, ctx, rr, 3)
	for _, c := range clients {
		if failed, first := c.calls(t, ctx, 9, "before"); failed > 0 {
			t.Errorf("%s session on r%d: %d of 9 calls failed before any fault, first: %s", c.server, c.owner, failed, first)
		}
	}
	upstreamSessions := remote.Sessions()
	if upstreamSessions != 3 {
		t.Errorf("the remote has %d sessions, want 3 (one initialize per client session)", upstreamSessions)
	}

	replicas[0].kill9(t)
	t.Logf("killed r0 (kill -9)")
	var lost, survived, notFound int
	for _, c := range clients {
		if !c.portable() && c.owner == 0 {
			start := time.Now()
			ok, what := c.call(ctx, "after")
			took := time.Since(start)
			if ok {
				t.Errorf("%s session of the killed replica: a call succeeded (%s)", c.server, what)
			}
			if strings.Contains(strings.ToLower(what), "not found") {
				notFound++
			} else {
				t.Errorf("%s session of the killed replica: %q, want session not found", c.server, what)
			}
			t.Logf("TARGET owner-bound session of the killed replica: %q after %v", what, took.Round(time.Millisecond))
			lost++
			continue
		}
		if failed, first := c.calls(t, ctx, 9, "after"); failed > 0 {
			t.Errorf("%s session on r%d: %d of 9 calls failed after r0 was killed, first: %s", c.server, c.owner, failed, first)
		} else {
			survived++
		}
	}
	if got := remote.Sessions(); got != upstreamSessions {
		t.Errorf("the remote has %d sessions after the crash, want %d: a session was initialized again", got, upstreamSessions)
	}
	t.Logf("TARGET after kill -9: %d sessions survived (portable, or owned by a live replica), %d owner-bound sessions of the dead replica lost (%d answered not found)", survived, lost, notFound)

	redis.Stop()
	for _, c := range clients {
		if !c.portable() && c.owner == 0 {
			continue
		}
		if failed, first := c.calls(t, ctx, 3, "redis-down"); failed > 0 {
			t.Errorf("%s session on r%d: %d of 3 calls failed with Redis down, first: %s", c.server, c.owner, failed, first)
		}
	}
	redis.Start()
	for _, c := range clients {
		if !c.portable() && c.owner == 0 {
			continue
		}
		if failed, first := c.calls(t, ctx, 3, "redis-back"); failed > 0 {
			t.Errorf("%s session on r%d: %d of 3 calls failed with Redis back, first: %s", c.server, c.owner, failed, first)
		}
	}
}

// A rate limit is the cluster's, not each replica's: three replicas behind
// round robin admit the configured rate (within 5%), where three separate
// limiters would admit three times it.
func TestClusterRateLimit(t *testing.T) {
	const rate, burst = 20.0, 20
	_, _, _, rr := startCluster(t, 3, map[string]any{"limits": map[string]any{"requestsPerSecond": rate, "burst": burst}})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	url := rr.srv.URL + "/servers/echo/mcp"
	post := func(sid, body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	// The initialize takes one token: burst-1 are left at least.
	resp, err := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %v %v", resp, err)
	}
	sid := resp.Header.Get("Mcp-Session-Id")

	const attempts, workers = 240, 6
	var admitted, refused, other atomic.Int64
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= attempts {
				resp, err := post(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`)
				switch {
				case err != nil:
					other.Add(1)
				case resp.StatusCode == http.StatusOK:
					admitted.Add(1)
				case resp.StatusCode == http.StatusTooManyRequests:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	allowed := float64(burst) + rate*elapsed.Seconds()
	t.Logf("TARGET cluster rate limit: %d admitted, %d refused (429), %d other of %d in %v; the limit allows %.1f (ratio %.3f)",
		admitted.Load(), refused.Load(), other.Load(), attempts, elapsed.Round(time.Millisecond), allowed, float64(admitted.Load())/allowed)
	if other.Load() != 0 {
		t.Errorf("%d requests neither admitted nor refused with 429", other.Load())
	}
	if n := float64(admitted.Load()); n > allowed*1.05+1 {
		t.Errorf("admitted %v, over the cluster's limit of %.1f by more than 5%%: the replicas limit separately", n, allowed)
	}
	if n := admitted.Load(); n < burst-1 {
		t.Errorf("admitted %d, fewer than the %d tokens the bucket had", n, burst-1)
	}
}

// A rolling restart (out of the proxy's rotation as a pod's endpoint
// leaves its Service, SIGTERM, drain, start again, back in rotation; one
// replica at a time) loses no reply of a portable session, under load all
// along; the owner-bound sessions of the replicas not restarted yet keep
// working.
func TestClusterRollingRestart(t *testing.T) {
	_, remote, replicas, rr := startCluster(t, 3, map[string]any{"drainTimeout": "2s"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	clients := connectAll(t, ctx, rr, 3)
	upstreamSessions := remote.Sessions()

	var portable []*clusterClient
	for _, c := range clients {
		if c.portable() {
			portable = append(portable, c)
		}
	}
	load := &clusterLoad{stop: make(chan struct{})}
	load.start(ctx, "rolling", portable)
	restarted := map[int]bool{}
	for i, r := range replicas {
		rr.remove(i) // the preStop: its endpoint leaves the Service first
		r.p.stop(t, syscall.SIGTERM, gatewayStopTimeout, true)
		r.start(t)
		rr.restore(i)
		restarted[i] = true
		for _, c := range clients {
			if c.portable() || restarted[c.owner] {
				continue
			}
			if failed, first := c.calls(t, ctx, 2, fmt.Sprintf("after-r%d", i)); failed > 0 {
				t.Errorf("%s session on r%d (not restarted yet): %d of 2 calls failed after r%d restarted, first: %s", c.server, c.owner, failed, i, first)
			}
		}
	}
	calls, failures, firstFailure := load.end()
	t.Logf("TARGET rolling restart of 3 replicas: %d calls on portable sessions, %d failed (first: %v)", calls, failures, firstFailure)
	if failures > 0 {
		t.Errorf("%d of %d calls on portable sessions failed during the rolling restart; first: %v", failures, calls, firstFailure)
	}
	if got := remote.Sessions(); got != upstreamSessions {
		t.Errorf("the remote has %d sessions after the rolling restart, want %d: a session was initialized again", got, upstreamSessions)
	}
}

// A key rotation mid-traffic (add a key, then promote it, the key file
// rewritten as a Secret's update does, each replica reloading it by
// itself) breaks no session: ids sealed by the old key still open on every
// replica, and sessions opened after the promotion, sealed by the new key,
// work on every replica too.
func TestClusterKeyRotation(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "seal.json")
	k1 := newSealKey("k1", true)
	writeSealKeys(t, keys, k1)
	_, _, replicas, rr := startCluster(t, 3, map[string]any{"sealKeyFile": keys})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	clients := connectAll(t, ctx, rr, 2)

	load := &clusterLoad{stop: make(chan struct{})}
	load.start(ctx, "rotation", clients)
	reloaded := func(n int32) {
		t.Helper()
		testkit.WaitFor(t, fmt.Sprintf("every replica to reload the keys (%d)", n), func() bool {
			for _, r := range replicas {
				if r.keysLoaded.Load() < n {
					return false
				}
			}
			return true
		})
	}
	k2 := newSealKey("k2", false)
	writeSealKeys(t, keys, k1, k2) // add
	reloaded(1)
	k1.Primary, k2.Primary = false, true
	writeSealKeys(t, keys, k1, k2) // promote
	reloaded(2)
	fresh := connectAll(t, ctx, rr, 1)
	for _, c := range fresh {
		if id := sealedKeyID(t, c.sid); id != "k2" {
			t.Errorf("a session opened after the promotion is sealed by %q, want k2", id)
		}
	}
	load.start(ctx, "rotation", fresh)
	// Each fresh session's calls reach every replica a few times.
	testkit.WaitFor(t, "calls on the fresh sessions", func() bool { return load.calls.Load() > int64(40*len(clients)) })
	calls, failures, firstFailure := load.end()
	t.Logf("TARGET key rotation (add, promote) mid-traffic: %d calls, %d failed (first: %v)", calls, failures, firstFailure)
	if failures > 0 {
		t.Errorf("%d of %d calls failed across the key rotation; first: %v", failures, calls, firstFailure)
	}
}

// sealedKeyID returns the id of the key that sealed session id sid
// ("<random>.<token>"; the token names its key in clear).
func sealedKeyID(t *testing.T, sid string) string {
	t.Helper()
	_, token, ok := strings.Cut(sid, ".")
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if !ok || err != nil || len(raw) < 2 || len(raw) < 2+int(raw[1]) {
		t.Fatalf("session id %q is not <random>.<sealed token>", sid)
	}
	return string(raw[2 : 2+int(raw[1])])
}
