package gateway

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// adminPool is /admin/servers with each server's pool ("processes").
type adminPool struct {
	Servers []struct {
		Name string
		PID  int
		Pool []struct {
			PID      int
			State    string
			Restarts uint64
			Sessions int
			Pending  int
		}
	}
}

// TestPoolAdminMetricsReload: a shared server with "processes": 2 through
// the whole gateway: two sessions are pinned to its two processes; the
// admin API and /metrics show each process with its session; a reload
// that changes "processes" to 3 replaces the server (its sessions end, as
// a changed server's do) with three processes, the old ones stopped.
func TestPoolAdminMetricsReload(t *testing.T) {
	stamp := time.Now().UnixNano()
	srv := fakeServer("pool", testkit.FakeOptions{Marker: fmt.Sprintf("gwpool-%d", stamp)})
	srv.Processes = 2
	cfg := newConfig(srv)
	cfg.Gateway.Admin = config.NewAdmin()
	cfg.Gateway.Admin.Token = adminToken
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, _ := startReloading(t, cfg, ReloadOptions{})

	a, b := g.client("pool"), g.client("pool")
	a.connect(t)
	b.connect(t)
	pa, pb := pidOf(t, a), pidOf(t, b)
	if pa == pb {
		t.Fatalf("both sessions on process %s", pa)
	}
	echoOK(t, a, "a")
	echoOK(t, b, "b")

	var sv adminPool
	g.adminDo(t, g.URL, "GET", "/admin/servers", adminToken, &sv)
	if len(sv.Servers) != 1 || len(sv.Servers[0].Pool) != 2 {
		t.Fatalf("/admin/servers: %+v, want one server with a pool of 2", sv)
	}
	var pids []string
	for i, p := range sv.Servers[0].Pool {
		if p.Sessions != 1 || p.State != "ready" || p.PID == 0 {
			t.Errorf("pool[%d] = %+v, want ready with 1 session", i, p)
		}
		pids = append(pids, strconv.Itoa(p.PID))
	}
	if !slices.Contains(pids, pa) || !slices.Contains(pids, pb) || strconv.Itoa(sv.Servers[0].PID) != pids[0] {
		t.Errorf("pool pids %v (server pid %d), sessions on %s and %s", pids, sv.Servers[0].PID, pa, pb)
	}

	fams := g.scrape(t)
	for i := range 2 {
		l := map[string]string{"server": "pool", "process": strconv.Itoa(i)}
		wantMetric(t, fams, "mcpgate_server_process_sessions", l, 1)
		wantMetric(t, fams, "mcpgate_server_process_up", l, 1)
		wantMetric(t, fams, "mcpgate_server_process_restarts_total", l, 0)
		if v, ok := metricValue(fams, "mcpgate_server_process_forwarded_total", l); !ok || v < 2 {
			t.Errorf("process %d forwarded %v, want at least its session's 2 calls", i, v)
		}
	}
	wantMetric(t, fams, "mcpgate_server_up", map[string]string{"server": "pool"}, 1)

	next := cloneConfig(cfg)
	next.Servers["pool"] = fakeServer("pool", testkit.FakeOptions{Marker: fmt.Sprintf("gwpool3-%d", stamp)})
	next.Servers["pool"].Processes = 3
	sum, err := g.gw.reload(next)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !slices.Equal(sum.Changed, []string{"pool"}) {
		t.Errorf("reload summary %+v, want pool changed", sum)
	}
	testkit.WaitFor(t, "the old processes stopped", func() bool { return len(testkit.Procs(fmt.Sprintf("gwpool-%d", stamp))) == 0 })
	testkit.WaitFor(t, "three new processes", func() bool { return len(testkit.Procs(fmt.Sprintf("gwpool3-%d", stamp))) == 3 })
	var seen []string
	for range 3 {
		c := g.client("pool")
		c.connect(t)
		seen = append(seen, pidOf(t, c))
	}
	if len(slices.Compact(slices.Sorted(slices.Values(seen)))) != 3 {
		t.Errorf("three new sessions on processes %v, want one each", seen)
	}
	g.adminDo(t, g.URL, "GET", "/admin/servers", adminToken, &sv)
	if len(sv.Servers) != 1 || len(sv.Servers[0].Pool) != 3 {
		t.Errorf("/admin/servers after the reload: %+v, want a pool of 3", sv)
	}
}

// TestPoolBehindEndpoint: an endpoint whose member is a pool opens its
// member sessions through the same placement: two endpoint sessions reach
// two processes, each keeping its own.
func TestPoolBehindEndpoint(t *testing.T) {
	srv := fakeServer("pool", testkit.FakeOptions{})
	srv.Processes = 2
	cfg := newConfig(srv)
	cfg.Endpoints["e"] = config.NewEndpoint("e", []string{"pool"})
	g := startGateway(t, cfg)
	a, b := g.endpointClient("e"), g.endpointClient("e")
	a.connect(t)
	b.connect(t)
	pa, pb := pidVia(t, a, "pool__pid"), pidVia(t, b, "pool__pid")
	if pa == pb {
		t.Errorf("both endpoint sessions on process %s", pa)
	}
	for range 3 {
		if pid := pidVia(t, a, "pool__pid"); pid != pa {
			t.Errorf("endpoint session moved from %s to %s", pa, pid)
		}
	}
}

// TestStatusPagePoolInChromium: the status page shows each process of a
// pool on a line of its own: its pid, state, sessions and requests in
// flight.
func TestStatusPagePoolInChromium(t *testing.T) {
	browser := testkit.Chromium(t)
	srv := fakeServer("pool", testkit.FakeOptions{})
	srv.Processes = 2
	cfg := newConfig(srv)
	cfg.Gateway.Admin = config.NewAdmin()
	cfg.Gateway.Admin.Token = adminToken
	g := startGateway(t, cfg)
	a, b := g.client("pool"), g.client("pool")
	a.connect(t)
	b.connect(t)
	pa, pb := pidOf(t, a), pidOf(t, b)
	ctx := testkit.Browse(t, browser, 1400, 900)
	const cell = `#servers tr[data-server="pool"] td.pool`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(g.URL+"/status?token="+adminToken),
		chromedp.WaitVisible(chromedp.CSS(cell+` div:nth-child(2)`)),
	); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(cell)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#0 ", "#1 ", pa + " ready, 1 sessions", pb + " ready, 1 sessions"} {
		if !strings.Contains(text, want) {
			t.Errorf("the pool's cell lacks %q:\n%s", want, text)
		}
	}
}
