package gateway

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// scrape GETs /metrics and parses it.
func (g *testGateway) scrape(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := g.tryScrape()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func (g *testGateway) tryScrape() (map[string]*dto.MetricFamily, error) {
	resp, err := g.http.Get(g.URL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	return fams, nil
}

// scrapeSettled scrapes until no POST is in flight. A legacy request's
// record is taken as its reply is put on the session's stream, which the
// client may read first; its POST leaves the in-flight gauge only after.
// (A /mcp POST's record is taken before its response ends.)
func (g *testGateway) scrapeSettled(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	testkit.WaitFor(t, "mcpgate_inflight_requests to be 0", func() bool {
		fams = g.scrape(t)
		n, ok := metricValue(fams, "mcpgate_inflight_requests", nil)
		return ok && n == 0
	})
	return fams
}

// metricValue is the value of the sample of family name whose labels
// include labels (nil: the family's only sample); false if none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	fam := fams[name]
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// want checks the value of one sample.
func wantMetric(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := metricValue(fams, name, labels)
	if !ok {
		got = 0 // a counter never incremented has no sample
		if want != 0 {
			t.Errorf("%s%v: no sample, want %v", name, labels, want)
			return
		}
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// TestMetrics: real traffic of every kind through a gateway (a session
// of 2025-11-25, a legacy SSE session, a stateless 2026-07-28 request, an
// endpoint session, a failing call, a policy's refusal, a 429 and a 401),
// then /metrics counts each exactly.
func TestMetrics(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Endpoints["all"] = config.NewEndpoint("all", []string{"fake"})
	cfg.Servers["fake"].Policy = &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Tools: []string{"forbidden"}},
	}}
	// A tool's second call within 1000 s is refused: each tool below is
	// called once per principal, but echo twice.
	cfg.Gateway.Limits = &config.Limits{ToolsPerSecond: 0.001}
	a := &tokenAuth{tokens: map[string]bool{"alice": true}, open: map[string]bool{"server/fake": true}}
	g := startGatewayAuth(t, cfg, a)

	c := g.client("fake")
	c.connect(t)
	if r := c.post(t, callBody("1", "echo", map[string]string{"message": "hi"}, "")); r.Status != http.StatusOK || toolText(t, r.final(t)) != "hi" {
		t.Fatalf("echo: %d %s", r.Status, r.Body)
	}
	if r := c.post(t, callBody("2", "no_such_tool", map[string]string{}, "")); r.Status != http.StatusOK || r.final(t).Error == nil {
		t.Fatalf("unknown tool: %d %s, want an error reply", r.Status, r.Body)
	}
	if r := c.post(t, callBody("3", "forbidden", map[string]string{}, "")); r.Status != http.StatusOK || r.final(t).Error == nil ||
		!strings.Contains(r.final(t).Error.Message, "not allowed") {
		t.Fatalf("forbidden tool: %d %s, want the policy's refusal", r.Status, r.Body)
	}
	if r := c.post(t, callBody("4", "echo", map[string]string{"message": "again"}, "")); r.Status != http.StatusTooManyRequests {
		t.Fatalf("second echo: %d %s, want 429", r.Status, r.Body)
	}

	lc := openLegacy(t, g, "/servers/fake/sse", nil)
	lc.initialize()
	if m := lc.call(callBody("5", "capabilities", map[string]string{}, "")); m.Error != nil {
		t.Fatalf("legacy call: %+v", m.Error)
	}

	if status, m := modernCall(t, g, "fake", "6", "pid", map[string]string{}, ""); status != http.StatusOK || m["error"] != nil {
		t.Fatalf("stateless call: %d %s", status, m["error"])
	}

	ec := &mcpClient{g: g, url: g.URL + "/endpoints/all/mcp", version: "2025-11-25", header: http.Header{}}
	if r := ec.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`); r.Status != http.StatusUnauthorized {
		t.Fatalf("endpoint without a token: %d, want 401", r.Status)
	}
	ec.header.Set("Authorization", "Bearer alice")
	ec.connect(t)
	if r := ec.post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); r.Status != http.StatusOK || r.final(t).Error != nil {
		t.Fatalf("endpoint tools/list: %d %s", r.Status, r.Body)
	}

	fams := g.scrapeSettled(t)
	server := func(method, outcome string) map[string]string {
		return map[string]string{"kind": "server", "target": "fake", "method": method, "outcome": outcome}
	}
	endpoint := func(method, outcome string) map[string]string {
		return map[string]string{"kind": "endpoint", "target": "all", "method": method, "outcome": outcome}
	}
	for _, w := range []struct {
		labels map[string]string
		n      float64
	}{
		{server("initialize", "ok"), 2},    // the session's and the legacy session's
		{server("tools/call", "ok"), 3},    // echo, the legacy call, the stateless call
		{server("tools/call", "error"), 1}, // the unknown tool
		{server("tools/call", "denied"), 1},
		{server("tools/call", "rate_limited"), 1},
		{endpoint("none", "unauthenticated"), 1},
		{endpoint("initialize", "ok"), 1},
		{endpoint("tools/list", "ok"), 1},
	} {
		wantMetric(t, fams, "mcpgate_requests_total", w.labels, w.n)
	}
	if n := len(fams["mcpgate_requests_total"].GetMetric()); n != 8 {
		t.Errorf("mcpgate_requests_total has %d samples, want 8", n)
	}
	wantMetric(t, fams, "mcpgate_request_duration_seconds", map[string]string{"kind": "server", "target": "fake", "method": "tools/call"}, 6)
	wantMetric(t, fams, "mcpgate_auth_refusals_total", map[string]string{"kind": "endpoint", "target": "all", "outcome": "unauthenticated"}, 1)
	wantMetric(t, fams, "mcpgate_limit_refusals_total", map[string]string{"kind": "server", "target": "fake", "outcome": "rate_limited"}, 1)
	for _, l := range []map[string]string{{"kind": "server", "target": "fake"}, {"kind": "endpoint", "target": "all"}} {
		for _, name := range []string{"mcpgate_bytes_in_total", "mcpgate_bytes_out_total"} {
			if v, _ := metricValue(fams, name, l); v <= 0 {
				t.Errorf("%s%v = %v, want > 0", name, l, v)
			}
		}
	}

	wantMetric(t, fams, "mcpgate_sessions", map[string]string{"kind": "server", "target": "fake", "era": "2025-11-25"}, 1)
	wantMetric(t, fams, "mcpgate_sessions", map[string]string{"kind": "server", "target": "fake", "era": "legacy-sse"}, 1)
	wantMetric(t, fams, "mcpgate_sessions", map[string]string{"kind": "endpoint", "target": "all", "era": "2025-11-25"}, 1)
	if n := len(fams["mcpgate_sessions"].GetMetric()); n != 3 {
		t.Errorf("mcpgate_sessions has %d samples, want 3 (a stateless request is no session)", n)
	}
	wantMetric(t, fams, "mcpgate_inflight_requests", nil, 0)
	wantMetric(t, fams, "mcpgate_server_up", map[string]string{"server": "fake"}, 1)
	wantMetric(t, fams, "mcpgate_server_state", map[string]string{"server": "fake", "state": "ready"}, 1)
	wantMetric(t, fams, "mcpgate_server_state", map[string]string{"server": "fake", "state": "backoff"}, 0)
	wantMetric(t, fams, "mcpgate_server_pending_requests", map[string]string{"server": "fake"}, 0)
	wantMetric(t, fams, "mcpgate_server_restarts_total", map[string]string{"server": "fake"}, 0)
	wantMetric(t, fams, "mcpgate_mux_unroutable_total", map[string]string{"server": "fake"}, 0)
	// The sessions' process: the session's and the legacy session's
	// calls and endpoint's tools/list (the stateless call has a process of
	// its own; the refused calls never left the gateway). Initializes are
	// answered by the gateway.
	if v, _ := metricValue(fams, "mcpgate_mux_forwarded_total", map[string]string{"server": "fake"}); v < 4 {
		t.Errorf("mcpgate_mux_forwarded_total = %v, want at least 4", v)
	}
	if _, ok := fams["mcpgate_audit_dropped_total"]; ok {
		t.Errorf("mcpgate_audit_dropped_total without an audit log")
	}
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("no %s: the Go and process collectors are registered", name)
		}
	}
}

// TestMetricsOff: with "metrics": false there is no /metrics.
func TestMetricsOff(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.Metrics = false
	g := startGateway(t, cfg)
	resp, err := g.http.Get(g.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics: %d, want 404", resp.StatusCode)
	}
	// And the requests are still served (no Observer in their way).
	c := g.client("fake")
	c.connect(t)
	if r := c.post(t, callBody("1", "echo", map[string]string{"message": "hi"}, "")); r.Status != http.StatusOK {
		t.Errorf("call: %d %s", r.Status, r.Body)
	}
}

// TestMetricsAuditDropped: with an audit log, its dropped lines are
// exported.
func TestMetricsAuditDropped(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.Audit = &config.Audit{File: t.TempDir() + "/audit.jsonl"}
	g := startGateway(t, cfg)
	c := g.client("fake")
	c.connect(t)
	fams := g.scrape(t)
	wantMetric(t, fams, "mcpgate_audit_dropped_total", nil, 0)
	wantMetric(t, fams, "mcpgate_requests_total", map[string]string{"kind": "server", "target": "fake", "method": "initialize", "outcome": "ok"}, 1)
}

// TestMetricsScrapedUnderLoad: scrapes while sessions call: nothing races
// (run with -race), and once the calls are answered every one is counted.
func TestMetricsScrapedUnderLoad(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	g := startGateway(t, cfg)
	const clients, calls = 8, 25
	done := make(chan struct{})
	var scrapes sync.WaitGroup
	scrapes.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := g.tryScrape(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c := g.client("fake")
			c.connect(t)
			for j := range calls {
				msg := fmt.Sprintf("%d-%d", i, j)
				if r := c.post(t, callBody(fmt.Sprint(j+1), "echo", map[string]string{"message": msg}, "")); r.Status != http.StatusOK || toolText(t, r.final(t)) != msg {
					t.Errorf("call %s: %d %s", msg, r.Status, r.Body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	scrapes.Wait()
	fams := g.scrapeSettled(t)
	labels := map[string]string{"kind": "server", "target": "fake", "method": "tools/call", "outcome": "ok"}
	wantMetric(t, fams, "mcpgate_requests_total", labels, clients*calls)
	wantMetric(t, fams, "mcpgate_sessions", map[string]string{"kind": "server", "target": "fake", "era": "2025-11-25"}, clients)
}

// scrapeUntil scrapes until cond holds of the metrics.
func (g *testGateway) scrapeUntil(t *testing.T, what string, cond func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	var fams map[string]*dto.MetricFamily
	testkit.WaitFor(t, "the metrics to show "+what, func() bool {
		fams = g.scrape(t)
		return cond(fams)
	})
	return fams
}

// TestMetricsServerStates: a server whose command is missing is down and
// backing off; one whose process crashed is restarted and counted.
func TestMetricsServerStates(t *testing.T) {
	missing := fakeServer("missing", testkit.FakeOptions{})
	missing.Command = "/nonexistent/mcpgate-test-command"
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}), missing)
	delete(cfg.Endpoints, "all")
	g := startGateway(t, cfg)
	server := func(name string) map[string]string { return map[string]string{"server": name} }
	g.scrapeUntil(t, "server missing backing off", func(f map[string]*dto.MetricFamily) bool {
		v, _ := metricValue(f, "mcpgate_server_state", map[string]string{"server": "missing", "state": "backoff"})
		return v == 1
	})

	c := g.client("fake")
	c.connect(t)
	if r := c.post(t, callBody("1", "crash", map[string]string{}, "")); r.final(t).Error == nil {
		t.Fatalf("crash: %d %s, want an error reply", r.Status, r.Body)
	}
	fams := g.scrapeUntil(t, "server fake restarted and ready", func(f map[string]*dto.MetricFamily) bool {
		restarts, _ := metricValue(f, "mcpgate_server_restarts_total", server("fake"))
		up, _ := metricValue(f, "mcpgate_server_up", server("fake"))
		return restarts == 1 && up == 1
	})
	wantMetric(t, fams, "mcpgate_server_up", server("missing"), 0)
	wantMetric(t, fams, "mcpgate_server_state", map[string]string{"server": "missing", "state": "ready"}, 0)
	wantMetric(t, fams, "mcpgate_server_state", map[string]string{"server": "fake", "state": "ready"}, 1)
	wantMetric(t, fams, "mcpgate_server_pending_requests", server("fake"), 0)
	wantMetric(t, fams, "mcpgate_requests_total", map[string]string{"kind": "server", "target": "fake", "method": "tools/call", "outcome": "error"}, 1)
}

func TestStateLabel(t *testing.T) {
	for _, tt := range []struct {
		ready bool
		text  string
		want  string
	}{
		{true, "", "ready"},
		{false, "starting", "starting"},
		{false, "backing off: command not found: uvx; retrying in 3s", "backoff"},
		{false, "failed: the gateway is shutting down", "failed"},
	} {
		if got := stateLabel(tt.ready, tt.text); got != tt.want {
			t.Errorf("stateLabel(%v, %q) = %q, want %q", tt.ready, tt.text, got, tt.want)
		}
	}
}

// TestMetricsCluster: a replica of a cluster names itself in
// mcpgate_cluster_info and exports the cluster's gauges and counters; one
// replica exports none of them.
func TestMetricsCluster(t *testing.T) {
	g := startGateway(t, inCluster(t, newConfig(fakeServer("fake", testkit.FakeOptions{})), "127.0.0.1:1"))
	var fams map[string]*dto.MetricFamily
	testkit.WaitFor(t, "Redis up and one live replica", func() bool {
		fams = g.scrape(t)
		up, _ := metricValue(fams, "mcpgate_cluster_redis_up", nil)
		live, _ := metricValue(fams, "mcpgate_cluster_live_replicas", nil)
		return up == 1 && live == 1
	})
	wantMetric(t, fams, "mcpgate_cluster_info", map[string]string{"replica": "pod-a", "advertise": "127.0.0.1:1"}, 1)
	for _, outcome := range []string{"forwarded", "owner_unreachable", "owner_gone", "owner_timeout"} {
		if _, ok := metricValue(fams, "mcpgate_cluster_forwarded_requests_total", map[string]string{"outcome": outcome}); !ok {
			t.Errorf("no mcpgate_cluster_forwarded_requests_total{outcome=%q}", outcome)
		}
	}
	for _, name := range []string{"mcpgate_cluster_resumed_sessions_total", "mcpgate_cluster_store_errors_total", "mcpgate_cluster_dropped_releases_total"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}

	// Every metric a replica exports is documented.
	doc, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range fams {
		if strings.HasPrefix(name, "mcpgate_") && !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("%s is not in docs/observability.md's table", name)
		}
	}

	one := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	for name := range one.scrape(t) {
		if strings.HasPrefix(name, "mcpgate_cluster_") {
			t.Errorf("%s exported by a gateway that is no replica", name)
		}
	}
}
