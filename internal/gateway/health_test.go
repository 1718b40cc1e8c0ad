package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestProbes: /healthz answers while the process serves; /readyz is 503
// while a critical server is down, naming it and its state, and 200 once
// it is up; a server that is not critical being down does not make the
// gateway unready, but is shown.
func TestProbes(t *testing.T) {
	down, otherDown := filepath.Join(t.TempDir(), "crit.down"), filepath.Join(t.TempDir(), "other.down")
	for _, f := range []string{down, otherDown} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	crit := fakeServer("crit", testkit.FakeOptions{Catalog: testkit.CatalogOptions{DownFile: down}})
	crit.Critical = true
	other := fakeServer("other", testkit.FakeOptions{Catalog: testkit.CatalogOptions{DownFile: otherDown}})
	cfg := newConfig(crit, other)
	g := startGateway(t, cfg)
	get := func(path string) (int, ReadyReport, string) {
		t.Helper()
		resp, err := g.http.Get(g.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var r ReadyReport
		_ = json.Unmarshal(raw, &r)
		return resp.StatusCode, r, string(raw)
	}
	if code, _, body := get("/healthz"); code != http.StatusOK || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	testkit.WaitFor(t, "the critical server seen down", func() bool {
		code, r, _ := get("/readyz")
		return code == http.StatusServiceUnavailable && !r.Ready && !r.Servers["crit"].Ready &&
			strings.Contains(r.Servers["crit"].State, "backing off") && r.Servers["crit"].Critical
	})
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "ready once it is up, the other one still down", func() bool {
		code, r, _ := get("/readyz")
		return code == http.StatusOK && r.Ready && r.Servers["crit"].State == "ready" &&
			!r.Servers["other"].Ready && r.Servers["other"].State != ""
	})
}
