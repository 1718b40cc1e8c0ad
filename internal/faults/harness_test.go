// Package faults is the fault-injection suite: each scenario runs a real
// gateway in-process (gateway.Serve on a loopback port) in front of
// misbehaving stdio servers (testkit.ChaosCommand) or misbehaving clients,
// and asserts the invariants of docs/architecture.md: every request
// answered exactly once within its timeout plus slack, other servers and
// sessions unaffected, goroutines, file descriptors, threads, children and
// memory back near their baseline, shutdown within its bound.
//
// Scenarios are named after the numbered items of the hardening issue
// (TestFault1_..., TestFault5_...). They measure the whole process, so none
// runs in parallel with another.
package faults

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	testkit.Main()
	goleak.VerifyTestMain(m)
}

// stopBound is what shutdown may take beyond drainTimeout: every process
// stopped in parallel (2*servers.StopGrace at most) plus slack for -race on
// a busy machine.
const stopBound = 4*time.Second + 4*time.Second

// requestTimeout is every server's request (and initialize) timeout. A
// call held behind a faulty server waits for it: no healthy call may take as
// long (healthyDuring).
const requestTimeout = 5 * time.Second

// testGateway is one gateway serving for one scenario.
type testGateway struct {
	t    *testing.T
	URL  string
	Addr string
	cfg  *config.Config
	logs *logSink
	tr   *http.Transport
	hc   *http.Client

	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopped  time.Duration // how long shutdown took
}

// newConfig returns a config with the given servers and test-friendly
// gateway settings: a short drain, fast sweeping.
func newConfig(servers ...*config.Server) *config.Config {
	cfg := config.Default()
	cfg.Gateway.Listen = "127.0.0.1:0"
	cfg.Gateway.DrainTimeout = 2 * time.Second
	cfg.Gateway.SessionSweepInterval = 100 * time.Millisecond
	for _, s := range servers {
		cfg.Servers[s.Name] = s
	}
	return cfg
}

// serverEntry turns a re-exec command into a stdio server entry with short
// timeouts, the fake's variables passed through env.
func serverEntry(name, cmd string, args, env []string) *config.Server {
	gw := config.Defaults()
	s := gw.NewServer(name)
	s.Command, s.Args = cmd, args
	s.Env = map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		s.Env[k] = v
	}
	s.Timeout = requestTimeout
	s.InitTimeout = requestTimeout
	return s
}

func fakeServer(name string, o testkit.FakeOptions) *config.Server {
	cmd, args, env := testkit.Command(o)
	return serverEntry(name, cmd, args, env)
}

func chaosServer(name string, o testkit.ChaosOptions) *config.Server {
	cmd, args, env := testkit.ChaosCommand(o)
	return serverEntry(name, cmd, args, env)
}

// marker returns a marker unique to this test for testkit.Procs.
func marker(t *testing.T, what string) string {
	return fmt.Sprintf("fault-%s-%s-%d", t.Name(), what, time.Now().UnixNano())
}

// startGateway serves cfg on a loopback port until the test ends or stop is
// called. Start failing is fatal: use gateway.Serve directly to test that.
func startGateway(t *testing.T, cfg *config.Config) *testGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := newLogSink(t)
	ctx, cancel := context.WithCancel(context.Background())
	g := &testGateway{
		t: t, URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String(), cfg: cfg, logs: logs,
		cancel: cancel, done: make(chan error, 1),
		// Both ends of every connection live in this process.
		tr: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 1024},
	}
	// A bound on every exchange, so that a gateway that never answers fails
	// the scenario instead of hanging the suite.
	g.hc = &http.Client{Transport: g.tr, Timeout: 60 * time.Second}
	go func() { g.done <- gateway.Serve(ctx, ln, cfg, logs.logger()) }()
	t.Cleanup(func() { g.stop() })
	return g
}

// stop cancels Serve and waits for it, failing the test unless it returns
// within drainTimeout + stopBound. It returns how long shutdown took.
func (g *testGateway) stop() time.Duration {
	g.stopOnce.Do(func() {
		bound := g.cfg.Gateway.DrainTimeout + stopBound
		start := time.Now()
		g.cancel()
		select {
		case err := <-g.done:
			if err != nil {
				g.t.Errorf("gateway.Serve: %v", err)
			}
		case <-time.After(bound + 20*time.Second):
			g.t.Errorf("shutdown did not finish within %v (bound %v)", bound+20*time.Second, bound)
		}
		g.stopped = time.Since(start)
		if g.stopped > bound {
			g.t.Errorf("shutdown took %v, want at most drainTimeout + stop = %v", g.stopped.Round(time.Millisecond), bound)
		}
		g.tr.CloseIdleConnections()
		g.logs.close()
	})
	return g.stopped
}

// logSink counts what the gateway logs and shows warnings in the test log
// (a bounded number, so a flood cannot drown the report).
type logSink struct {
	t      *testing.T
	bytes  atomic.Int64
	lines  atomic.Int64
	warns  atomic.Int64
	mu     sync.Mutex
	closed bool // guarded by mu: t.Log is not allowed after the test
	shown  int  // guarded by mu
}

func newLogSink(t *testing.T) *logSink { return &logSink{t: t} }

func (s *logSink) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(s, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func (s *logSink) Write(p []byte) (int, error) {
	s.bytes.Add(int64(len(p)))
	s.lines.Add(int64(bytes.Count(p, []byte("\n"))))
	if bytes.Contains(p, []byte("level=WARN")) || bytes.Contains(p, []byte("level=ERROR")) {
		s.warns.Add(1)
		s.mu.Lock()
		if !s.closed && s.shown < 40 {
			s.shown++
			line := strings.TrimRight(string(p), "\n")
			if len(line) > 400 {
				line = line[:400] + "..."
			}
			s.t.Log("gateway: " + line)
		}
		s.mu.Unlock()
	}
	return len(p), nil
}

func (s *logSink) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// baseline is the process's resource use before a scenario.
type baseline struct {
	goroutines, fds, threads int
	rss                      int64
}

func takeBaseline() baseline {
	return baseline{goroutines: runtime.NumGoroutine(), fds: countFDs(), threads: procStatus("Threads"), rss: int64(procStatus("VmRSS")) << 10}
}

// check waits (bounded) for goroutines and FDs to come back near the
// baseline, and checks threads, RSS and that no process with any of the
// markers is left.
func (b baseline) check(t *testing.T, markers ...string) {
	t.Helper()
	for _, m := range markers {
		if live := testkit.WaitProcsGone(m, 10*time.Second); len(live) > 0 {
			t.Errorf("processes with marker %s still alive after shutdown: %v", m, live)
		}
	}
	var g, f int
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, f = runtime.NumGoroutine(), countFDs()
		if (g <= b.goroutines+3 && f <= b.fds+3) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g > b.goroutines+3 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("goroutines: %d after the scenario, %d before\n%s", g, b.goroutines, buf)
	}
	if f > b.fds+3 {
		t.Errorf("open file descriptors: %d after the scenario, %d before", f, b.fds)
	}
	// The runtime keeps idle threads, so only a gross excess is a leak.
	if th := procStatus("Threads"); th > b.threads+64 {
		t.Errorf("OS threads: %d after the scenario, %d before", th, b.threads)
	}
	runtime.GC()
	if rss := int64(procStatus("VmRSS")) << 10; rss > b.rss+768<<20 {
		t.Errorf("RSS: %d MiB after the scenario, %d MiB before", rss>>20, b.rss>>20)
	}
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// procStatus returns a numeric field of /proc/self/status (VmRSS in kB).
func procStatus(field string) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return -1
}

// liveHeap returns the bytes of live heap after a collection: what the
// gateway retains, apart from garbage not yet collected.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
