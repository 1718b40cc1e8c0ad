package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// clineEntry is a server entry as Cline writes it, running the fake
// server marked with marker.
func clineEntry(marker string, disabled bool) map[string]any {
	cmd, args, env := testkit.Command(testkit.FakeOptions{Marker: marker})
	e := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		e[k] = v
	}
	return map[string]any{"command": cmd, "args": args, "env": e, "type": "stdio",
		"disabled": disabled, "autoApprove": []string{"echo"}, "timeout": 60}
}

// A Cline settings file served as it is: the disabled server is never
// started (no process of it), /readyz shows it as disabled and stays
// ready, the admin API lists it as disabled, and the other serves.
func TestDisabledServerServed(t *testing.T) {
	on, off := fmt.Sprintf("disabled-on-%d", time.Now().UnixNano()), fmt.Sprintf("disabled-off-%d", time.Now().UnixNano())
	data, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"on": clineEntry(on, false), "off": clineEntry(off, true)}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cline_mcp_settings.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadWith(path, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Gateway.Admin = config.NewAdmin()
	cfg.Gateway.Admin.Token = adminToken
	g := startGateway(t, cfg)

	c := g.client("on")
	c.connect(t)
	echoOK(t, c, "the enabled server")
	if r := g.client("off").post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`); r.Status != http.StatusNotFound {
		t.Errorf("the disabled server answered %d, want 404", r.Status)
	}

	resp, err := g.http.Get(g.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rd ReadyReport
	if err := json.Unmarshal(raw, &rd); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !rd.Ready {
		t.Errorf("/readyz %d %s: a disabled server must not make the gateway unready", resp.StatusCode, raw)
	}
	if s := rd.Servers["off"]; !s.Disabled || s.State != "disabled" || s.Ready {
		t.Errorf("/readyz off = %+v in %s, want disabled", s, raw)
	}
	if !strings.Contains(string(raw), `"disabled": true`) {
		t.Errorf("/readyz body %s lacks \"disabled\": true", raw)
	}

	var sv struct {
		Servers []struct {
			Name, State string
			Disabled    bool
			PID         int
		}
	}
	g.adminDo(t, g.URL, "GET", "/admin/servers", adminToken, &sv)
	found := false
	for _, s := range sv.Servers {
		if s.Name == "off" {
			found = s.Disabled && s.State == "disabled" && s.PID == 0
		}
	}
	if !found || len(sv.Servers) != 2 {
		t.Errorf("admin servers %+v, want off listed as disabled", sv.Servers)
	}

	if n := len(testkit.Procs(off)); n != 0 {
		t.Errorf("%d processes of the disabled server, want none", n)
	}
	if n := len(testkit.Procs(on)); n != 1 {
		t.Errorf("%d processes of the enabled server, want 1", n)
	}
}

// A reload that disables a server stops it like a removed one, and
// /readyz shows it disabled; one that enables it again starts it.
func TestReloadDisablesServer(t *testing.T) {
	marker := fmt.Sprintf("reload-disabled-%d", time.Now().UnixNano())
	cfg := newConfig(fakeServer("a", testkit.FakeOptions{}), fakeServer("b", testkit.FakeOptions{Marker: marker}))
	g, _ := startReloading(t, cfg, ReloadOptions{})
	c := g.client("b")
	c.connect(t)
	echoOK(t, c, "before")

	next := cloneConfig(cfg)
	off := next.Servers["b"]
	off.Disabled = true
	delete(next.Servers, "b")
	next.Disabled = map[string]*config.Server{"b": off}
	sum, err := g.gw.reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Removed) != 1 || sum.Removed[0] != "b" {
		t.Errorf("summary %+v, want b removed", sum)
	}
	if rd := g.gw.Readiness(); !rd.Ready || !rd.Servers["b"].Disabled || rd.Servers["b"].State != "disabled" {
		t.Errorf("readiness after disabling b: %+v", rd)
	}
	testkit.WaitFor(t, "b's process stopped", func() bool { return len(testkit.Procs(marker)) == 0 })

	if _, err := g.gw.reload(cloneConfig(cfg)); err != nil {
		t.Fatal(err)
	}
	c = g.client("b")
	c.connect(t)
	echoOK(t, c, "enabled again")
	if rd := g.gw.Readiness(); rd.Servers["b"].Disabled {
		t.Errorf("b still disabled: %+v", rd.Servers["b"])
	}
}
