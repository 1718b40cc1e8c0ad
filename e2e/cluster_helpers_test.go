package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// This file runs gateways as a cluster: several replicas of the real
// binary on loopback sharing seal keys and a real Redis, behind a
// round-robin proxy with keep-alives off both ways (a reused connection
// would take a client back to the same replica and hide a lost session).

var echoBuild struct {
	once sync.Once
	path string
	err  error
}

// echoBinary returns the path of cmd/mcpecho, built on first use: the
// stdio server the replicas run.
func echoBinary(t testing.TB) string {
	t.Helper()
	b := &echoBuild
	b.once.Do(func() {
		b.path = filepath.Join(binDir, "mcpecho")
		cmd := exec.Command(goTool(), "build", "-o", b.path, "./cmd/mcpecho")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/mcpecho: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// sealKey is one entry of a seal key file.
type sealKey struct {
	ID      string `json:"id"`
	Key     string `json:"key"`
	Primary bool   `json:"primary"`
}

// newSealKey returns a random key named id.
func newSealKey(id string, primary bool) sealKey {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return sealKey{ID: id, Key: base64.StdEncoding.EncodeToString(key), Primary: primary}
}

// sealKeyFile writes a key file of one random primary key and returns its
// path.
func sealKeyFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seal.json")
	writeSealKeys(t, path, newSealKey("k1", true))
	return path
}

// writeSealKeys replaces the key file at path with keys, as a Secret's
// update does (a new file renamed over the old).
func writeSealKeys(t testing.TB, path string, keys ...sealKey) {
	t.Helper()
	data, err := json.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// gatewayReplica is one replica of a cluster.
type gatewayReplica struct {
	name, addr string
	path       string // its config file
	p          *process
	keysLoaded atomic.Int32 // "seal keys changed" lines: reloads that swapped the keys
	env        []string     // added to the process's environment when it starts
}

// startReplica starts replica name listening on addr with config cfg
// (whose gateway block it completes with listen and the cluster block).
func startReplica(t testing.TB, name, addr string, servers map[string]serverConfig, gateway map[string]any, redisAddr string) *gatewayReplica {
	t.Helper()
	gw := map[string]any{"listen": addr}
	for k, v := range gateway {
		gw[k] = v
	}
	cluster := map[string]any{"instance": name, "advertise": addr, "heartbeat": "200ms"}
	if redisAddr != "" {
		cluster["redis"] = map[string]any{"url": "redis://" + redisAddr + "/0"}
	}
	gw["cluster"] = cluster
	r := &gatewayReplica{name: name, addr: addr, path: writeGatewayConfig(t, gatewayConfig{MCPServers: servers, Gateway: gw})}
	r.start(t)
	return r
}

// start starts the replica's process (again, after a kill).
func (r *gatewayReplica) start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), "serve", "--config", r.path)
	if r.env != nil {
		cmd.Env = append(os.Environ(), r.env...)
	}
	p := startProcess(t, r.name, cmd, func(line string) {
		if strings.Contains(line, "seal keys changed") {
			r.keysLoaded.Add(1)
		}
	})
	r.p = p
	t.Cleanup(func() {
		select {
		case <-p.exited: // killed by the test
		default:
			p.stop(t, syscall.SIGTERM, gatewayStopTimeout, true)
		}
	})
	waitListening(t, p, r.addr)
}

// restart stops the replica (SIGTERM, a clean exit) and starts it again
// with env added to its environment.
func (r *gatewayReplica) restart(t testing.TB, env ...string) {
	t.Helper()
	r.p.stop(t, syscall.SIGTERM, gatewayStopTimeout, true)
	r.env = env
	r.start(t)
}

// kill9 kills the replica's process group at once: a crash.
func (r *gatewayReplica) kill9(t testing.TB) {
	t.Helper()
	_ = syscall.Kill(-r.p.cmd.Process.Pid, syscall.SIGKILL)
	<-r.p.exited
	<-r.p.logged
}

// roundRobin is the load balancer in front of the replicas: each request
// goes to the next replica, on a new connection. A replica that refuses
// the connection (it is down) is skipped, as proxies retry a connect
// failure on the next upstream; nothing else is retried.
type roundRobin struct {
	addrs []string
	all   []int // the indexes of addrs
	next  atomic.Uint64
	opens atomic.Uint64
	out   []atomic.Bool // replicas taken out of rotation (a pod's endpoint removed before its SIGTERM)
	srv   *httptestServer

	// openOn and callOn, when set, are the replicas (indexes in addrs)
	// the requests that open sessions and all other requests go to, in
	// turn, instead of every replica: a benchmark has sessions opened on
	// one replica and served by another (startRoundRobinSplit).
	openOn, callOn []int

	// wrap, when set, wraps the proxy for each request: a test breaks
	// a response on its way to the client (cluster_clients_test.go).
	wrap atomic.Pointer[func(http.Handler) http.Handler]

	mu       sync.Mutex
	owners   map[string]int // session id -> the replica that answered its initialize
	notFound []string       // the requests a replica answered 404: what a client that never initializes again would see
}

// httptestServer is the proxy's listener and server.
type httptestServer struct {
	URL string
	srv *http.Server
	ln  net.Listener
}

func startRoundRobin(t testing.TB, addrs []string) *roundRobin {
	t.Helper()
	return startRoundRobinWith(t, addrs, false)
}

// startRoundRobinWith is startRoundRobin with keep-alives on, both ways,
// when keepAlive is set: each request still goes to the next replica, over
// a pooled connection (a benchmark's proxy, which must not add a TCP
// handshake per request to what it measures).
func startRoundRobinWith(t testing.TB, addrs []string, keepAlive bool) *roundRobin {
	t.Helper()
	return startRoundRobinSplit(t, addrs, keepAlive, nil, nil)
}

// startRoundRobinSplit is startRoundRobinWith sending the requests that
// open sessions to the replicas openOn only and the others to callOn
// only (indexes in addrs; nil: every replica).
func startRoundRobinSplit(t testing.TB, addrs []string, keepAlive bool, openOn, callOn []int) *roundRobin {
	t.Helper()
	rr := &roundRobin{addrs: addrs, owners: map[string]int{}, out: make([]atomic.Bool, len(addrs)), openOn: openOn, callOn: callOn}
	for i := range addrs {
		rr.all = append(rr.all, i)
	}
	transport := &http.Transport{DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 256, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), backendKey{}, new(int)))
		},
		FlushInterval: -1,
		Transport:     rr.retryingTransport(transport),
		ModifyResponse: func(resp *http.Response) error {
			if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && resp.Request.Header.Get("Mcp-Session-Id") == "" {
				rr.mu.Lock()
				rr.owners[sid] = *resp.Request.Context().Value(backendKey{}).(*int)
				rr.mu.Unlock()
			}
			if resp.StatusCode == http.StatusNotFound {
				req := resp.Request
				rr.mu.Lock()
				rr.notFound = append(rr.notFound, fmt.Sprintf("%s %s (session %.8s) on r%d", req.Method, req.URL.RequestURI(), req.Header.Get("Mcp-Session-Id"), *req.Context().Value(backendKey{}).(*int)))
				rr.mu.Unlock()
			}
			return nil
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var h http.Handler = proxy
		if wrap := rr.wrap.Load(); wrap != nil {
			h = (*wrap)(h)
		}
		h.ServeHTTP(w, r)
	})}
	srv.SetKeepAlivesEnabled(keepAlive)
	go func() { _ = srv.Serve(ln) }()
	rr.srv = &httptestServer{URL: "http://" + ln.Addr().String(), srv: srv, ln: ln}
	t.Cleanup(func() { _ = srv.Close() })
	return rr
}

type backendKey struct{}

// retryingTransport picks the next replica for each request, and the one
// after it when the connection is refused.
func (rr *roundRobin) retryingTransport(base http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		start, set := rr.next.Add(1), rr.callOn
		if req.Method == http.MethodPost && req.Header.Get("Mcp-Session-Id") == "" {
			// Sessions are opened on each replica in turn, so that each
			// owns some.
			start, set = rr.opens.Add(1), rr.openOn
		}
		if set == nil {
			set = rr.all
		}
		// The body is read first: a refused connection may have closed it,
		// and the next replica needs it whole.
		var body []byte
		if req.Body != nil {
			var err error
			if body, err = io.ReadAll(req.Body); err != nil {
				return nil, err
			}
			req.Body.Close()
		}
		var last error
		for i := range len(set) {
			n := set[(start+uint64(i))%uint64(len(set))]
			if rr.out[n].Load() {
				continue
			}
			out := req.Clone(req.Context())
			out.URL = &url.URL{Scheme: "http", Host: rr.addrs[n], Path: req.URL.Path, RawQuery: req.URL.RawQuery}
			if body != nil {
				out.Body = io.NopCloser(bytes.NewReader(body))
			}
			if slot, ok := req.Context().Value(backendKey{}).(*int); ok {
				*slot = n
			}
			resp, err := base.RoundTrip(out)
			if err == nil {
				return resp, nil
			}
			last = err
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "dial" {
				return nil, err
			}
		}
		return nil, last
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// owner returns the replica that answered session sid's initialize.
func (rr *roundRobin) owner(sid string) (int, bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	n, ok := rr.owners[sid]
	return n, ok
}

// remove takes replica n out of rotation, as Kubernetes removes a
// stopping pod's endpoint during its preStop sleep, before its SIGTERM;
// restore puts it back once it is ready again.
func (rr *roundRobin) remove(n int)  { rr.out[n].Store(true) }
func (rr *roundRobin) restore(n int) { rr.out[n].Store(false) }

// notFounds returns the requests a replica answered 404 so far.
func (rr *roundRobin) notFounds() []string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return append([]string(nil), rr.notFound...)
}
