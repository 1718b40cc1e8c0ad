package gateway

import (
	"runtime"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestMetricsBuildInfo: /metrics names the running build, as
// cmd/mcpgate set it (Version, Commit) and the Go runtime.
func TestMetricsBuildInfo(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("fake", testkit.FakeOptions{})))
	fams := g.scrape(t)
	wantMetric(t, fams, "mcpgate_build_info", map[string]string{"version": Version, "commit": Commit, "goversion": runtime.Version()}, 1)
	if n := len(fams["mcpgate_build_info"].GetMetric()); n != 1 {
		t.Errorf("%d mcpgate_build_info samples, want 1", n)
	}
	// Without an audit log there is nothing to count about one.
	for _, name := range []string{"mcpgate_audit_write_errors_total", "mcpgate_audit_lost_total", "mcpgate_audit_reopens_total"} {
		if fams[name] != nil {
			t.Errorf("%s exported without an audit log", name)
		}
	}
}
