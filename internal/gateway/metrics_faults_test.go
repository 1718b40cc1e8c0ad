package gateway

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// seriesCount counts the series of every family, and the distinct values
// of each label over all families.
func seriesCount(fams map[string]*dto.MetricFamily) (int, map[string]map[string]bool) {
	n := 0
	values := map[string]map[string]bool{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			n++
			for _, l := range m.GetLabel() {
				if values[l.GetName()] == nil {
					values[l.GetName()] = map[string]bool{}
				}
				values[l.GetName()][l.GetValue()] = true
			}
		}
	}
	return n, values
}

// TestMetricsFaultsCardinality: a client sending many distinct methods,
// tool names, unknown servers and endpoints, and garbage, adds no label
// value: the series stay bounded.
func TestMetricsFaultsCardinality(t *testing.T) {
	cfg := newConfig(fakeServer("fake", testkit.FakeOptions{}))
	cfg.Gateway.Metrics = true
	g := startGateway(t, cfg)
	c := g.client("fake")
	c.connect(t)
	_ = c.post(t, callBody("1", "echo", map[string]string{"message": "warm"}, ""))
	before, _ := seriesCount(g.scrapeSettled(t))

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				k := fmt.Sprintf("%d-%d", w, i)
				_ = c.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"x/%s","params":{}}`, i, k))
				_ = c.post(t, callBody(fmt.Sprint(i), "tool-"+k, map[string]string{}, ""))
				_ = c.post(t, `{"jsonrpc":"2.0","method":"notifications/`+k+`"}`)
				_ = c.post(t, `not json `+k)
				u := g.client("nope-" + k)
				_ = u.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
				e := g.endpointClient("ep-" + k)
				_ = e.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`)
			}
		})
	}
	wg.Wait()
	after, values := seriesCount(g.scrapeSettled(t))
	t.Logf("series: %d before, %d after", before, after)
	for label, vs := range values {
		for v := range vs {
			if strings.Contains(v, "nope-") || strings.Contains(v, "ep-") || strings.Contains(v, "x/") || strings.Contains(v, "tool-") {
				t.Errorf("label %s has a client's value %q", label, v)
			}
		}
	}
	if after > before+40 {
		t.Errorf("series grew from %d to %d", before, after)
	}
}

// TestMetricsFaultsReload: scrapes during reloads never fail (race
// detector on), and a removed server's per-server series are gone after
// its reload.
func TestMetricsFaultsReload(t *testing.T) {
	cfg := newConfig(fakeServer("keep", testkit.FakeOptions{}), fakeServer("gone", testkit.FakeOptions{}))
	cfg.Gateway.Metrics = true
	g, _ := startServing(t, cfg, ReloadOptions{})
	gone := g.client("gone")
	gone.connect(t)
	echoOK(t, gone, "x")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var scrapeErrs []error
	var mu sync.Mutex
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := g.tryScrape(); err != nil {
					mu.Lock()
					scrapeErrs = append(scrapeErrs, err)
					mu.Unlock()
				}
			}
		})
	}
	without := cloneConfig(cfg)
	delete(without.Servers, "gone")
	for i := range 6 {
		next := cloneConfig(cfg)
		if i%2 == 0 {
			next = cloneConfig(without)
		}
		if err := g.gw.Reload(next); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	if err := g.gw.Reload(cloneConfig(without)); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if len(scrapeErrs) > 0 {
		t.Errorf("%d scrapes failed during reloads, first: %v", len(scrapeErrs), scrapeErrs[0])
	}
	fams := g.scrapeSettled(t)
	var stale []string
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == "gone" {
					stale = append(stale, name)
				}
			}
		}
	}
	t.Logf("families still naming the removed server: %v", stale)
	for _, name := range stale {
		switch {
		case strings.HasPrefix(name, "mcpgate_server_"), strings.HasPrefix(name, "mcpgate_mux_"), name == "mcpgate_sessions":
			t.Errorf("%s still has a series of the removed server", name)
		}
	}
}
