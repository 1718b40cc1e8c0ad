package faults

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// This file holds the fault scenarios of per-tool policies.

// TestPolicy_UnderFaults: a server under a policy stops reading its stdin.
// A denied call, even pretty-printed over many lines, is answered at once
// (it never reaches the server); a filtered list and an allowed call each
// get one answer within the server's bounds; a call the policy allows on
// another server in flight when the gateway stops gets one JSON-RPC
// error; nothing leaks.
func TestPolicy_UnderFaults(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	mStuck, mOK := marker(t, "stuck"), marker(t, "ok")
	stuck := chaosServer("stuck", testkit.ChaosOptions{Marker: mStuck, Journal: journal, StopReadingAfter: 1, IgnoreSIGTERM: true})
	stuck.Timeout, stuck.StdinTimeout = 2*time.Second, 3*time.Second
	deny := &config.Policy{Default: config.PolicyAllow, Rules: []config.PolicyRule{
		{Effect: config.PolicyDeny, Tools: []string{"crash"}},
	}}
	stuck.Policy = deny
	ok := chaosServer("ok", testkit.ChaosOptions{Marker: mOK, Journal: journal})
	ok.Policy = deny
	g := startGateway(t, newConfig(stuck, ok))

	c := g.client("stuck")
	c.connect(t)
	testkit.WaitFor(t, "the server to stop reading", func() bool {
		return len(testkit.JournalLines(journal, "stopped-reading")) > 0
	})
	pretty := strings.ReplaceAll(callBody("7", "crash", map[string]string{}, ""), ",", ",\n    ")
	for _, body := range []string{callBody("6", "crash", nil, ""), "{\n  " + pretty[1:]} {
		start := time.Now()
		r, err := c.post(body)
		id := "6"
		if strings.Contains(body, "\n") {
			id = "7"
		}
		if err := answeredOnce(r, err, id); err != nil {
			t.Fatalf("denied call: %v", err)
		}
		if m := r.answers(id)[0]; m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "not allowed") {
			t.Errorf("denied call %s: %+v, want -32602 not allowed", id, m)
		}
		// A call that waited for the server is answered only by its
		// request timeout.
		if d := time.Since(start); d >= stuck.Timeout {
			t.Errorf("denied call %s to a server that stopped reading answered after %v: it waited for the server", id, d)
		}
	}
	bound := stuck.Timeout + stuck.StdinTimeout + 5*time.Second
	for i, body := range []string{`{"jsonrpc":"2.0","id":"l","method":"tools/list"}`, callBody("8", "echo", map[string]string{"message": "x"}, "")} {
		id := []string{`"l"`, "8"}[i]
		start := time.Now()
		r, err := c.post(body)
		if err := answeredOnce(r, err, id); err != nil {
			t.Errorf("%s to the stuck server: %v", id, err)
		}
		if d := time.Since(start); d > bound {
			t.Errorf("%s to the stuck server answered after %v, want within %v", id, d, bound)
		}
	}

	// An allowed call in flight at shutdown on the other server.
	o := g.client("ok")
	o.connect(t)
	res := make(chan error, 1)
	go func() {
		r, err := o.post(callBody("9", "slow", map[string]int{"ms": 600000}, ""))
		if err = answeredOnce(r, err, "9"); err == nil && r.answers("9")[0].Error == nil {
			err = fmt.Errorf("a result, want a JSON-RPC error")
		} else if err == nil && r.Status == http.StatusAccepted {
			err = fmt.Errorf("a bare 202")
		}
		res <- err
	}()
	testkit.WaitFor(t, "the slow call to reach the server", func() bool {
		return len(testkit.JournalLines(journal, "called slow")) > 0
	})
	t.Logf("shutdown took %v", g.stop())
	select {
	case err := <-res:
		if err != nil {
			t.Errorf("allowed call in flight at shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("allowed call in flight at shutdown not answered 10s after shutdown")
	}
	base.check(t, mStuck, mOK)
}
