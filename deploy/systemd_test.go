package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

const unitPath = "systemd/mcpgate.service"

func TestSystemdUnit(t *testing.T) {
	u := parseUnit(t, unitPath)
	svc := u["Service"]
	if svc == nil || u["Install"] == nil {
		t.Fatalf("%s: want [Service] and [Install] sections, have %v", unitPath, u)
	}

	start := strings.Fields(u.one("Service", "ExecStart"))
	if len(start) != 4 || !filepath.IsAbs(start[0]) || filepath.Base(start[0]) != "mcpgate" ||
		!slices.Equal(start[1:3], []string{"serve", "--config"}) || start[3] != configPath {
		t.Errorf("ExecStart=%q, want /ABS/mcpgate serve --config %s", start, configPath)
	}

	// SIGTERM to the gateway alone: it drains, then stops each server's
	// process group itself. control-group would signal them all at once.
	want := map[string]string{
		"KillMode":        "mixed",
		"Restart":         "on-failure",
		"NoNewPrivileges": "yes",
		"ProtectSystem":   "strict",
		"ProtectHome":     "yes",
		"PrivateTmp":      "yes",
	}
	for k, v := range want {
		if got := u.one("Service", k); got != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
	if sig := u.one("Service", "KillSignal"); sig != "" && sig != "SIGTERM" {
		t.Errorf("KillSignal=%s: the gateway drains on SIGTERM (or SIGINT)", sig)
	}
	if u.one("Service", "DynamicUser") != "yes" {
		if user := u.one("Service", "User"); user == "" || user == "root" || user == "0" {
			t.Errorf("neither DynamicUser=yes nor a User other than root")
		}
	}
	// Node's JIT needs writable executable memory.
	if u.one("Service", "MemoryDenyWriteExecute") == "yes" {
		t.Error("MemoryDenyWriteExecute=yes breaks npx servers")
	}

	stop, err := time.ParseDuration(u.one("Service", "TimeoutStopSec"))
	cfg := config.Default()
	if err != nil || stop <= stopBudget(cfg) {
		t.Errorf("TimeoutStopSec=%s (%v), want more than the default drain and stop, %v", u.one("Service", "TimeoutStopSec"), err, stopBudget(cfg))
	}

	reload := strings.Fields(u.one("Service", "ExecReload"))
	if len(reload) != 3 || filepath.Base(reload[0]) != "kill" || reload[1] != "-HUP" || reload[2] != "$MAINPID" {
		t.Errorf("ExecReload=%q, want kill -HUP $MAINPID", reload)
	}
	// The gateway reloads on SIGHUP; a binary from before hot reload dies
	// of it, which systemd counts as a clean exit: this restarts it then.
	if !slices.Contains(strings.Fields(u.one("Service", "RestartForceExitStatus")), "SIGHUP") {
		t.Error("RestartForceExitStatus lacks SIGHUP")
	}

	// ProtectSystem=strict leaves only the unit's own directories
	// writable: HOME (npx's and uvx's caches) must be one of them.
	var home string
	for _, e := range svc["Environment"] {
		if v, ok := strings.CutPrefix(e, "HOME="); ok {
			home = v
		}
	}
	writable := []string{}
	if d := u.one("Service", "CacheDirectory"); d != "" {
		writable = append(writable, "/var/cache/"+d)
	}
	if d := u.one("Service", "StateDirectory"); d != "" {
		writable = append(writable, "/var/lib/"+d)
	}
	if !slices.Contains(writable, home) {
		t.Errorf("Environment=HOME=%s is not a writable directory of the unit (%q)", home, writable)
	}
}

// TestSystemdVerify runs systemd-analyze verify on the unit, where it is
// installed, with the binary's path pointed at one that exists.
func TestSystemdVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	start := strings.Fields(parseUnit(t, unitPath).one("Service", "ExecStart"))
	text := strings.ReplaceAll(readFile(t, unitPath), start[0]+" ", "/bin/true ")
	tmp := filepath.Join(t.TempDir(), "mcpgate.service")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", tmp).CombinedOutput()
	// verify exits 0 on unknown keys but names the file: anything about
	// our file is a problem.
	if err != nil || strings.Contains(string(out), tmp) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
