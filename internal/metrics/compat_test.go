package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

type compatSource struct {
	fakeSource
	c Compat
}

func (s *compatSource) Compat() Compat { return s.c }

// A Source with Compat gets the quirk counters, as they are; one without
// it gets none of them.
func TestCompatCollector(t *testing.T) {
	src := &compatSource{c: Compat{
		VersionHeaderMismatch:     map[string]uint64{"body_newer": 3, "session_other": 0, "repeated": 2},
		RequestsWithoutID:         map[string]uint64{"streamable": 1, "batch": 4, "legacy_sse": 0, "stateless": 5},
		InitializedWithoutSession: 7,
	}}
	m := New(src)
	want := `
# HELP mcpgate_initialized_without_session_total notifications/initialized POSTed without Mcp-Session-Id (answered 202, dropped).
# TYPE mcpgate_initialized_without_session_total counter
mcpgate_initialized_without_session_total 7
# HELP mcpgate_requests_without_id_dropped_total Request methods sent without an id, dropped and never forwarded, by transport.
# TYPE mcpgate_requests_without_id_dropped_total counter
mcpgate_requests_without_id_dropped_total{transport="batch"} 4
mcpgate_requests_without_id_dropped_total{transport="legacy_sse"} 0
mcpgate_requests_without_id_dropped_total{transport="stateless"} 5
mcpgate_requests_without_id_dropped_total{transport="streamable"} 1
# HELP mcpgate_version_header_mismatch_total Requests served though MCP-Protocol-Version did not match (kind: body_newer, session_other, repeated).
# TYPE mcpgate_version_header_mismatch_total counter
mcpgate_version_header_mismatch_total{kind="body_newer"} 3
mcpgate_version_header_mismatch_total{kind="repeated"} 2
mcpgate_version_header_mismatch_total{kind="session_other"} 0
`
	names := []string{"mcpgate_initialized_without_session_total", "mcpgate_requests_without_id_dropped_total", "mcpgate_version_header_mismatch_total"}
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(New(&fakeSource{}).Gatherer(), names...); err != nil || n != 0 {
		t.Errorf("a Source without Compat: %d metrics of it, %v", n, err)
	}
	if problems, err := testutil.CollectAndLint(compatCollector{src}); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}
