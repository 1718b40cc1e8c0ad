package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMethodLabel(t *testing.T) {
	for in, want := range map[string]string{
		"tools/call": "tools/call", "initialize": "initialize", "subscriptions/listen": "subscriptions/listen",
		"": "none", "tools/evil": "other", "x/" + strings.Repeat("a", 100): "other", "notifications/initialized": "other",
	} {
		if got := Method(in); got != want {
			t.Errorf("Method(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOutcomeLabel(t *testing.T) {
	for in, want := range map[string]string{"ok": "ok", "denied": "denied", "overloaded": "overloaded", "weird": "error", "": "error"} {
		if got := Outcome(in); got != want {
			t.Errorf("Outcome(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakeSource is a Source with fixed answers.
type fakeSource struct {
	sessions []Sessions
	servers  []Server
	dropped  int64
	audit    bool
}

func (s *fakeSource) Sessions() []Sessions        { return s.sessions }
func (s *fakeSource) InFlight() int64             { return 3 }
func (s *fakeSource) Servers() []Server           { return s.servers }
func (s *fakeSource) AuditDropped() (int64, bool) { return s.dropped, s.audit }

// TestScrapeCollector: what the Source says now is what is exported.
func TestScrapeCollector(t *testing.T) {
	src := &fakeSource{
		sessions: []Sessions{{Target: "a", Kind: "server", Era: "2025-11-25", N: 2}, {Target: "all", Kind: "endpoint", Era: "legacy-sse", N: 1}},
		servers: []Server{
			{Name: "a", State: StateBackoff, Pending: 4, Counters: &Counters{Restarts: 5, Unroutable: 6, DroppedProgress: 7, TasksForgotten: 8}},
			{Name: "b", State: StatePerSession, Up: true},
		},
		dropped: 9, audit: true,
	}
	c := newScrapeCollector(src)
	want := `
# HELP mcpgate_audit_dropped_total Audit log lines dropped because the log's queue was full.
# TYPE mcpgate_audit_dropped_total counter
mcpgate_audit_dropped_total 9
# HELP mcpgate_inflight_requests Client POSTs carrying requests being answered (a legacy one until its replies are on its stream).
# TYPE mcpgate_inflight_requests gauge
mcpgate_inflight_requests 3
# HELP mcpgate_mux_dropped_progress_total Progress notifications for requests no longer pending.
# TYPE mcpgate_mux_dropped_progress_total counter
mcpgate_mux_dropped_progress_total{server="a"} 7
# HELP mcpgate_mux_tasks_forgotten_total Tasks of a shared server forgotten because their session created more than 1,024: the oldest becomes unknown to every session.
# TYPE mcpgate_mux_tasks_forgotten_total counter
mcpgate_mux_tasks_forgotten_total{server="a"} 8
# HELP mcpgate_mux_unroutable_total Server-to-client requests refused: no single session to route them to.
# TYPE mcpgate_mux_unroutable_total counter
mcpgate_mux_unroutable_total{server="a"} 6
# HELP mcpgate_server_restarts_total Processes of the server's shared process started after the first.
# TYPE mcpgate_server_restarts_total counter
mcpgate_server_restarts_total{server="a"} 5
# HELP mcpgate_server_up 1 when the server is ready (a server whose processes are per session counts as ready), else 0.
# TYPE mcpgate_server_up gauge
mcpgate_server_up{server="a"} 0
mcpgate_server_up{server="b"} 1
# HELP mcpgate_server_pending_requests Requests in flight to the server, queued ones included, over all its processes.
# TYPE mcpgate_server_pending_requests gauge
mcpgate_server_pending_requests{server="a"} 4
mcpgate_server_pending_requests{server="b"} 0
# HELP mcpgate_sessions Established client sessions, by target and era (protocol version, or legacy-sse).
# TYPE mcpgate_sessions gauge
mcpgate_sessions{era="2025-11-25",kind="server",target="a"} 2
mcpgate_sessions{era="legacy-sse",kind="endpoint",target="all"} 1
`
	names := []string{"mcpgate_audit_dropped_total", "mcpgate_inflight_requests", "mcpgate_mux_dropped_progress_total",
		"mcpgate_mux_tasks_forgotten_total", "mcpgate_mux_unroutable_total", "mcpgate_server_restarts_total", "mcpgate_server_up", "mcpgate_server_pending_requests", "mcpgate_sessions"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP mcpgate_server_state 1 for the server's state (starting, ready, backoff, failed, per-session), 0 for the others.
# TYPE mcpgate_server_state gauge
mcpgate_server_state{server="a",state="backoff"} 1
mcpgate_server_state{server="a",state="failed"} 0
mcpgate_server_state{server="a",state="per-session"} 0
mcpgate_server_state{server="a",state="ready"} 0
mcpgate_server_state{server="a",state="starting"} 0
mcpgate_server_state{server="b",state="backoff"} 0
mcpgate_server_state{server="b",state="failed"} 0
mcpgate_server_state{server="b",state="per-session"} 1
mcpgate_server_state{server="b",state="ready"} 0
mcpgate_server_state{server="b",state="starting"} 0
`), "mcpgate_server_state"); err != nil {
		t.Error(err)
	}
	// A pool ("processes" above 1): each process by its index.
	pool := newScrapeCollector(&fakeSource{servers: []Server{{Name: "c", State: StateReady, Up: true, Counters: &Counters{Restarts: 1}, Processes: []Process{
		{Up: true, Sessions: 3, Pending: 2, Forwarded: 10},
		{Up: false, Sessions: 1, Restarts: 1, Forwarded: 4},
	}}}})
	if err := testutil.CollectAndCompare(pool, strings.NewReader(`
# HELP mcpgate_server_process_up 1 when the process of the server's pool ("processes" above 1) is ready, else 0.
# TYPE mcpgate_server_process_up gauge
mcpgate_server_process_up{process="0",server="c"} 1
mcpgate_server_process_up{process="1",server="c"} 0
# HELP mcpgate_server_process_sessions Sessions pinned to the process of the server's pool.
# TYPE mcpgate_server_process_sessions gauge
mcpgate_server_process_sessions{process="0",server="c"} 3
mcpgate_server_process_sessions{process="1",server="c"} 1
# HELP mcpgate_server_process_pending_requests Requests in flight to the process of the server's pool, queued ones included.
# TYPE mcpgate_server_process_pending_requests gauge
mcpgate_server_process_pending_requests{process="0",server="c"} 2
mcpgate_server_process_pending_requests{process="1",server="c"} 0
# HELP mcpgate_server_process_restarts_total Starts of the process of the server's pool after its first.
# TYPE mcpgate_server_process_restarts_total counter
mcpgate_server_process_restarts_total{process="0",server="c"} 0
mcpgate_server_process_restarts_total{process="1",server="c"} 1
# HELP mcpgate_server_process_forwarded_total Client requests written to the process of the server's pool.
# TYPE mcpgate_server_process_forwarded_total counter
mcpgate_server_process_forwarded_total{process="0",server="c"} 10
mcpgate_server_process_forwarded_total{process="1",server="c"} 4
`), "mcpgate_server_process_up", "mcpgate_server_process_sessions", "mcpgate_server_process_pending_requests",
		"mcpgate_server_process_restarts_total", "mcpgate_server_process_forwarded_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "mcpgate_server_process_up"); n != 0 {
		t.Errorf("%d process samples for servers without a pool", n)
	}
	// No audit log: no audit metric.
	src.audit = false
	if n := testutil.CollectAndCount(c, "mcpgate_audit_dropped_total"); n != 0 {
		t.Errorf("%d audit samples without an audit log", n)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestRequests: each record counts once in its request metrics, and a
// refusal in its refusal counter too; the handler serves them with the Go
// and process collectors.
func TestRequests(t *testing.T) {
	m := New(&fakeSource{})
	for _, r := range []Request{
		{Target: "a", Kind: "server", Method: "tools/call", Outcome: "ok", Duration: 20 * time.Millisecond, BytesIn: 10, BytesOut: 100},
		{Target: "a", Kind: "server", Method: "tools/call", Outcome: "ok", Duration: 2 * time.Millisecond, BytesIn: 5, BytesOut: 7}, // the same series again
		{Target: "a", Kind: "server", Method: "tools/call", Outcome: "rate_limited", BytesIn: 10, BytesOut: 50},
		{Target: "all", Kind: "endpoint", Method: "", Outcome: "unauthenticated"},
		{Target: "a", Kind: "server", Method: "made/up", Outcome: "error"},
	} {
		m.Request(&r)
	}
	rm := m.requests
	for _, tt := range []struct {
		got, want float64
		what      string
	}{
		{testutil.ToFloat64(rm.total.WithLabelValues("server", "a", "tools/call", "ok")), 2, "ok calls"},
		{testutil.ToFloat64(rm.total.WithLabelValues("server", "a", "tools/call", "rate_limited")), 1, "refused calls"},
		{testutil.ToFloat64(rm.total.WithLabelValues("server", "a", "other", "error")), 1, "other"},
		{testutil.ToFloat64(rm.total.WithLabelValues("endpoint", "all", "none", "unauthenticated")), 1, "unauthenticated"},
		{testutil.ToFloat64(rm.bytesIn.WithLabelValues("server", "a")), 25, "bytes in"},
		{testutil.ToFloat64(rm.bytesOut.WithLabelValues("server", "a")), 157, "bytes out"},
		{testutil.ToFloat64(rm.authRefusals.WithLabelValues("endpoint", "all", "unauthenticated")), 1, "auth refusals"},
		{testutil.ToFloat64(rm.limitRefusals.WithLabelValues("server", "a", "rate_limited")), 1, "limit refusals"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.what, tt.got, tt.want)
		}
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, s := range []string{`mcpgate_request_duration_seconds_bucket{kind="server",method="tools/call",target="a",le="0.025"} 3`, "go_goroutines", "process_start_time_seconds"} {
		if !strings.Contains(string(body), s) {
			t.Errorf("no %q in:\n%.2000s", s, body)
		}
	}
}

// TestRequestNoAllocs: counting a request of labels already seen
// allocates nothing (its series are looked up once per label set).
func TestRequestNoAllocs(t *testing.T) {
	m := New(&fakeSource{})
	r := Request{Target: "a", Kind: "server", Method: "tools/call", Outcome: "ok", Duration: time.Millisecond, BytesIn: 10, BytesOut: 100}
	m.Request(&r)
	if n := testing.AllocsPerRun(100, func() { m.Request(&r) }); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
	if got := testutil.ToFloat64(m.requests.total.WithLabelValues("server", "a", "tools/call", "ok")); got != 102 {
		t.Errorf("ok calls = %v, want 102", got)
	}
}
