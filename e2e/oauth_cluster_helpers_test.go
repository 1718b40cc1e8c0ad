package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The harness of oauth_cluster_test.go: replicas of the real binary sharing a Redis and a seal
// key file, each with gateway.auth.server on, behind the round-robin proxy whose URL is the
// public URL and the issuer. Every request of a flow goes through the proxy, so each step
// (the authorize, the sign-in, the consent, the token request, the MCP calls) lands on another
// replica than the one before.

// authCluster is a running cluster whose replicas are one authorization server.
type authCluster struct {
	redis    *testkit.RedisServer
	replicas []*gatewayReplica
	rr       *roundRobin
	keys     string // the seal key file
	meta     asMetadata
	resource string // the echo server's canonical URL on the proxy: the resource of the tokens
}

// startAuthCluster starts n replicas serving the stdio echo server "echo", protected by their
// own authorization server with one user (e2eUser), the seal keys of file keys (a new one of a
// single key k1 when keys is "").
func startAuthCluster(t *testing.T, n int, keys string) *authCluster {
	t.Helper()
	if keys == "" {
		keys = sealKeyFile(t)
	}
	redis := testkit.StartRedis(t)
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = testkit.FreeAddr(t)
	}
	// The proxy first: its URL is in every replica's config. Until the replicas listen, it
	// refuses nothing it is asked (it is asked nothing).
	rr := startRoundRobin(t, addrs)
	base := rr.srv.URL
	as := map[string]any{"users": []any{map[string]any{"name": e2eUser, "passwordHash": passwordHash(t, e2ePassword)}}}
	gw := map[string]any{
		"sealKeyFile": keys,
		"auth":        map[string]any{"publicUrl": base, "server": as},
	}
	servers := map[string]serverConfig{"echo": {Command: echoBinary(t)}}
	c := &authCluster{redis: redis, rr: rr, keys: keys, resource: base + "/servers/echo/mcp"}
	for i, addr := range addrs {
		c.replicas = append(c.replicas, startReplica(t, fmt.Sprintf("r%d", i), addr, servers, gw, redis.Addr))
	}
	c.meta = fetchASMetadata(t, base)
	return c
}

// proxied is the number of requests the proxy has sent on so far.
func (c *authCluster) proxied() uint64 { return c.rr.next.Load() + c.rr.opens.Load() }

// lastOpenedOn is the replica the proxy sent its last session-opening request to (a POST
// without Mcp-Session-Id, as a form post is), when every replica was up and nothing else was
// proxied concurrently.
func (c *authCluster) lastOpenedOn() int { return int(c.rr.opens.Load() % uint64(len(c.replicas))) }

// direct is the echo server's URL on replica i itself, bypassing the proxy (a token's resource
// is still the proxy's URL: the replicas' public URL).
func (c *authCluster) direct(i int) string {
	return "http://" + c.replicas[i].addr + "/servers/echo/mcp"
}

// statusOnEach is bearerStatus of tok on each replica, directly.
func (c *authCluster) statusOnEach(t *testing.T, tok string) []int {
	t.Helper()
	out := make([]int, len(c.replicas))
	for i := range c.replicas {
		out[i] = bearerStatus(t, c.direct(i), tok)
	}
	return out
}

// probeOnEach is the gate's answer to tok on each replica, directly, without opening a
// session (a tools/list on a session that does not exist): 401 when the token is refused, 404
// when it is accepted (the session is unknown). What a test polls: a poll by initialize
// would open a session on every attempt.
func (c *authCluster) probeOnEach(t *testing.T, tok string) []int {
	t.Helper()
	out := make([]int, len(c.replicas))
	for i := range c.replicas {
		out[i] = mcpDo(t, http.MethodPost, c.direct(i), "Bearer "+tok, "no-such-session", toolsListRequest(9)).status
	}
	return out
}

// allAre reports whether every status is want.
func allAre(statuses []int, want int) bool {
	for _, s := range statuses {
		if s != want {
			return false
		}
	}
	return true
}

// echoCall calls the echo tool with message on session sid at url with access token tok and
// fails unless the message comes back.
func echoCall(t *testing.T, url, tok, sid, message string) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":%q}}}`, message)
	r := mcpDo(t, http.MethodPost, url, "Bearer "+tok, sid, body)
	if r.status != http.StatusOK || !strings.Contains(r.body, message) {
		t.Fatalf("tools/call echo %q on session %.8s: %d: %s", message, sid, r.status, r.body)
	}
}

// tokenKeyID is the kid of JWT tok's header: the seal key (or "seed") that signed it.
func tokenKeyID(t *testing.T, tok string) string {
	t.Helper()
	head, _, ok := strings.Cut(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	var h struct {
		Kid string `json:"kid"`
	}
	if !ok || err != nil || json.Unmarshal(raw, &h) != nil {
		t.Fatalf("access token %.20s... is not a JWT", tok)
	}
	return h.Kid
}

// tokenTraffic is a client using one access token without pause, through the proxy, while a
// test changes the cluster under it: gate probes (a tools/list on a session that does not
// exist: 404 when the token is accepted, 401 when it is refused), one after another.
type tokenTraffic struct {
	requests, refused, errors atomic.Int64
	first                     atomic.Value // string: the first refusal or error
	stop, done                chan struct{}
}

// startTokenTraffic starts sending probes with tok to url until end.
func startTokenTraffic(url, tok string) *tokenTraffic {
	tt := &tokenTraffic{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tt.done)
		for {
			select {
			case <-tt.stop:
				return
			default:
			}
			tt.probe(url, tok)
		}
	}()
	return tt
}

func (tt *tokenTraffic) probe(url, tok string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(toolsListRequest(9)))
	if err != nil {
		panic(err) // a constant request: cannot fail
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Mcp-Session-Id", "no-such-session")
	req.Header.Set("Mcp-Protocol-Version", mcpProtocolVersion)
	resp, err := http.DefaultClient.Do(req)
	tt.requests.Add(1)
	if err != nil {
		tt.errors.Add(1)
		tt.first.CompareAndSwap(nil, err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		tt.refused.Add(1)
		tt.first.CompareAndSwap(nil, resp.Status)
	}
}

// end stops the traffic and returns its figures.
func (tt *tokenTraffic) end() (requests, failed int64, first any) {
	close(tt.stop)
	<-tt.done
	return tt.requests.Load(), tt.refused.Load() + tt.errors.Load(), tt.first.Load()
}
