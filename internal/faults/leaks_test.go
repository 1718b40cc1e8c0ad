package faults

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// standalone opens c's GET stream (watch_test.go) and collects its
// messages until the returned stop is called.
func standalone(t *testing.T, c *client) (stop func() []json.RawMessage) {
	t.Helper()
	w := watch(t, c)
	return func() []json.RawMessage {
		w.stop()
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.msgs
	}
}

// TestFault8_BackgroundLogStaysInItsSession: in shared mode, session A's
// background work logs a secret while only session B (which set no log
// level) has a request in flight. The message has no certain owner: it
// must reach neither B's request stream nor a bystander C listening with a
// level set.
func TestFault8_BackgroundLogStaysInItsSession(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	m := marker(t, "shared")
	g := startGateway(t, newConfig(chaosServer("shared", testkit.ChaosOptions{Marker: m, Journal: journal})))
	const secret = "SECRET-OF-SESSION-A-4711"
	a, b, c := g.client("shared"), g.client("shared"), g.client("shared")
	for _, x := range []*client{a, b, c} {
		x.connect(t)
	}
	for _, x := range []*client{a, c} {
		r, err := x.post(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)
		if err := answeredOnce(r, err, "1"); err != nil || r.final().Error != nil {
			t.Fatalf("logging/setLevel: %v %s", err, r.Msgs)
		}
	}
	stopC := standalone(t, c)

	bDone := make(chan *reply, 1)
	go func() {
		r, err := b.post(callBody("5", "slow", map[string]int{"ms": 2000}, ""))
		if err := answeredOnce(r, err, "5"); err != nil {
			t.Error(err)
		}
		bDone <- r
	}()
	testkit.WaitFor(t, "B's call to reach the server", func() bool { return len(testkit.JournalLines(journal, "called slow")) > 0 })
	r, err := a.post(callBody("6", "bglog", map[string]any{"message": secret, "ms": 200}, ""))
	if err := answeredOnce(r, err, "6"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the background log", func() bool { return len(testkit.JournalLines(journal, "background-log")) > 0 })
	// Written after the log line, so once it is back the log was routed.
	if _, err := c.echo(7, "order"); err != nil {
		t.Fatal(err)
	}
	rb := <-bDone
	for _, raw := range rb.Msgs {
		if strings.Contains(string(raw), secret) {
			t.Errorf("session B's request stream got session A's log message: %s", raw)
		}
	}
	for _, ev := range stopC() {
		if bytes.Contains(ev, []byte(secret)) {
			t.Errorf("bystander session C got session A's log message: %s", ev)
		}
	}
	g.stop()
	base.check(t, m)
}

// TestFault8_ChildrenGetMinimalEnvironment: a stdio child sees PATH and
// what its entry passes (env, inheritEnv), not the gateway's secrets.
func TestFault8_ChildrenGetMinimalEnvironment(t *testing.T) {
	t.Setenv("MCPGATE_FAULT_SECRET", "cloud-credential")
	t.Setenv("MCPGATE_FAULT_SHARED", "meant-for-the-child")
	base := takeBaseline()
	m := marker(t, "env")
	s := chaosServer("env", testkit.ChaosOptions{Marker: m})
	s.InheritEnv = []string{"MCPGATE_FAULT_SHARED"}
	g := startGateway(t, newConfig(s))
	c := g.client("env")
	c.connect(t)
	r, err := c.post(callBody("1", "environ", map[string]any{}, ""))
	if err := answeredOnce(r, err, "1"); err != nil {
		t.Fatal(err)
	}
	env, err := toolText(r.final())
	if err != nil {
		t.Fatal(err)
	}
	vars := "\n" + env + "\n"
	if strings.Contains(vars, "\nMCPGATE_FAULT_SECRET=") {
		t.Errorf("the child inherited a gateway variable not meant for it:\n%s", env)
	}
	for _, want := range []string{"\nPATH=", "\nMCPGATE_FAULT_SHARED=meant-for-the-child\n"} {
		if !strings.Contains(vars, want) {
			t.Errorf("the child's environment lacks %q:\n%s", strings.TrimSpace(want), env)
		}
	}
	g.stop()
	base.check(t, m)
}

// TestFault9_StderrFloodBounded: a child writing stderr as fast as it can
// is logged at about stderrBytesPerSec, and the other server stays fast.
func TestFault9_StderrFloodBounded(t *testing.T) {
	base := takeBaseline()
	mFlood, mOK := marker(t, "flood"), marker(t, "ok")
	flood := chaosServer("flood", testkit.ChaosOptions{Marker: mFlood, StderrFlood: true})
	flood.StderrBytesPerSec = 64 << 10
	cfg := newConfig(flood, fakeServer("ok", testkit.FakeOptions{Marker: mOK}))
	g := startGateway(t, cfg)
	healthy := g.client("ok")
	healthy.connect(t)
	var rate float64
	healthyDuring(t, healthy, func() {
		testkit.WaitFor(t, "stderr to be logged", func() bool { return g.logs.bytes.Load() > 64<<10 })
		b0, t0 := g.logs.bytes.Load(), time.Now()
		time.Sleep(2 * time.Second) // the measurement window
		rate = float64(g.logs.bytes.Load()-b0) / time.Since(t0).Seconds()
	})
	t.Logf("gateway log rate during a stderr flood: %.0f KiB/s", rate/1024)
	// Log lines add their attributes to the stderr bytes; 3x is generous.
	if limit := 3 * float64(flood.StderrBytesPerSec); rate > limit {
		t.Errorf("gateway logged %.0f KiB/s of a stderr flood, want about stderrBytesPerSec (%d KiB/s)", rate/1024, flood.StderrBytesPerSec>>10)
	}
	g.stop()
	base.check(t, mFlood, mOK)
}

// TestFault9_UnroutableFloodRateLimited: a server sending 3,000 server
// requests nobody asked for gets them refused without one warning each.
func TestFault9_UnroutableFloodRateLimited(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	mFlood, mOK := marker(t, "unroutable"), marker(t, "ok")
	cfg := newConfig(chaosServer("unroutable", testkit.ChaosOptions{Marker: mFlood, Journal: journal, UnroutableRequests: 3000}),
		fakeServer("ok", testkit.FakeOptions{Marker: mOK}))
	g := startGateway(t, cfg)
	healthy := g.client("ok")
	healthy.connect(t)
	w0 := g.logs.warns.Load()
	healthyDuring(t, healthy, func() {
		c := g.client("unroutable")
		if err := c.tryConnect(); err != nil {
			t.Errorf("session on the flooding server: %v", err)
			return
		}
		// The flood follows initialize; a call answered after it proves
		// the gateway read it all.
		if _, err := c.echo(1, "after the flood"); err != nil {
			t.Errorf("call after the flood: %v", err)
		}
	})
	if n := g.logs.warns.Load() - w0; n > 50 {
		t.Errorf("%d warnings logged for 3,000 unroutable server requests, want them rate-limited", n)
	}
	g.stop()
	base.check(t, mFlood, mOK)
}

// TestFault10_ForeignHostRefused: on a loopback listener, a Host that is
// not a loopback name (DNS rebinding) is refused unless allowedHosts
// lists it.
func TestFault10_ForeignHostRefused(t *testing.T) {
	base := takeBaseline()
	m := marker(t, "ok")
	cfg := newConfig(fakeServer("ok", testkit.FakeOptions{Marker: m}))
	cfg.Gateway.AllowedHosts = []string{"mcp.internal"}
	g := startGateway(t, cfg)
	_, port, _ := strings.Cut(g.Addr, ":")
	for host, want := range map[string]bool{
		"attacker.example":             false,
		"attacker.example:" + port:     false,
		"localhost:" + port:            true,
		"127.0.0.1:" + port:            true,
		"MCP.Internal:" + port:         true,
		"127.0.0.1.attacker.example:1": false,
	} {
		c := g.client("ok")
		req := c.request(http.MethodPost, initializeBody(c.version))
		req.Host = host
		r, err := c.do(req, nil)
		if err != nil {
			t.Fatalf("Host %s: %v", host, err)
		}
		if got := r.Status != http.StatusForbidden; got != want {
			t.Errorf("Host %s: status %d, want allowed=%v", host, r.Status, want)
		}
	}
	g.stop()
	base.check(t, m)
}
