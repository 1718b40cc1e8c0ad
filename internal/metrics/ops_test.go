package metrics

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestBuildInfo: the build is one gauge of 1 whose labels name it, on a
// gateway's own registry, scraped as Prometheus reads it.
func TestBuildInfo(t *testing.T) {
	m := New(&fakeSource{})
	m.SetBuild(Build{Version: "v1.2.3", Commit: "0123abc", GoVersion: "go1.26.8"})
	want := `
# HELP mcpgate_build_info Always 1; its labels name the running build (join on it to label other series).
# TYPE mcpgate_build_info gauge
mcpgate_build_info{commit="0123abc",goversion="go1.26.8",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "mcpgate_build_info"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(m.Gatherer(), "mcpgate_build_info"); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestAuditWrites: the audit log's counters are read at each scrape.
func TestAuditWrites(t *testing.T) {
	m := New(&fakeSource{})
	var errs atomic.Int64
	m.WatchAudit(func() AuditWrites { return AuditWrites{Errors: errs.Load(), Lost: 2 * errs.Load(), Reopens: 1} })
	names := []string{"mcpgate_audit_write_errors_total", "mcpgate_audit_lost_total", "mcpgate_audit_reopens_total"}
	for _, n := range []int64{0, 3} {
		errs.Store(n)
		want := strings.NewReplacer("ERR", strconv.FormatInt(n, 10), "LOST", strconv.FormatInt(2*n, 10)).Replace(`
# HELP mcpgate_audit_lost_total Audit log lines lost because their write failed (mcpgate_audit_dropped_total counts those the full queue dropped).
# TYPE mcpgate_audit_lost_total counter
mcpgate_audit_lost_total LOST
# HELP mcpgate_audit_reopens_total Times the audit log's file was opened again: renamed or removed by a rotation, or SIGHUP.
# TYPE mcpgate_audit_reopens_total counter
mcpgate_audit_reopens_total 1
# HELP mcpgate_audit_write_errors_total Writes to the audit log that failed (a full disk, an I/O error, a rotated file that could not be reopened).
# TYPE mcpgate_audit_write_errors_total counter
mcpgate_audit_write_errors_total ERR
`)
		if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), names...); err != nil {
			t.Errorf("with %d errors: %v", n, err)
		}
	}
	if problems, err := testutil.GatherAndLint(m.Gatherer(), names...); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}
