package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// atkModern POSTs a modern tools/call and returns status and raw body (or
// the error, e.g. a timeout).
func atkModern(g *testGateway, d time.Duration, server, id, tool, args, extra string) (int, string, error) {
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + extra +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}}`
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/servers/"+server+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := g.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}

// F1 with a real process: the server's per-request timeout (shorter than
// InputWait) fires while the tools/call is parked for sampling; the
// client then retries in time, with a valid state.
func TestAttackGatewayTimeoutWhileParked(t *testing.T) {
	s := fakeServer("s", testkit.FakeOptions{})
	// Long enough for the server's sampling request to come back before
	// it on a busy machine, and far shorter than InputWait.
	s.Timeout = 2 * time.Second
	cfg := newConfig(s)
	cfg.Gateway.InputWait = 10 * time.Second
	g := startGateway(t, cfg)
	// The timeout is for the parked call, not for a process starting
	// under -race on a busy machine.
	testkit.WaitFor(t, "the server to be ready", func() bool { return g.gw.Readiness().Servers["s"].Ready })
	status, body, err := atkModern(g, 10*time.Second, "s", "1", "sample", `{"prompt":"p"}`, "")
	var r struct {
		Result struct {
			ResultType    string
			InputRequests map[string]json.RawMessage
			RequestState  string
		}
	}
	if err != nil || json.Unmarshal([]byte(body), &r) != nil || r.Result.ResultType != "input_required" {
		t.Fatalf("first: %d %v %s", status, err, body)
	}
	var key string
	for k := range r.Result.InputRequests {
		key = k
	}
	testkit.WaitFor(t, "the parked call to time out upstream", func() bool { return g.pending("s") == 0 })
	st, _ := json.Marshal(r.Result.RequestState)
	answer := `,"inputResponses":{"` + key + `":{"role":"assistant","content":{"type":"text","text":"Paris"},"model":"m"}},"requestState":` + string(st)
	start := time.Now()
	status, body, err = atkModern(g, 5*time.Second, "s", "2", "sample", `{"prompt":"p"}`, answer)
	if err != nil {
		t.Errorf("retry within InputWait: no answer after %v (%v): hangs", time.Since(start).Round(time.Millisecond), err)
	} else {
		t.Logf("retry: %d %s", status, body)
	}
}

// A parked request cannot be kept parked past InputWait by retrying with
// no answers: each retry is asked again, but the request's time is fixed
// when it is first parked; after it the state no longer opens, the call is
// cancelled upstream, and another client of the shared server can be
// asked again (while it was parked the mux saw two clients with calls
// written, so nobody else could be).
func TestAttackGatewayParkedForeverBlocksOthers(t *testing.T) {
	cfg := newConfig(fakeServer("s", testkit.FakeOptions{}))
	cfg.Gateway.InputWait = 300 * time.Millisecond
	g := startGateway(t, cfg)
	before := time.Now() // the request is parked after this
	_, body, _ := atkModern(g, 10*time.Second, "s", "1", "sample", `{"prompt":"p"}`, "")
	start := time.Now()
	sent := start // when the retry that got body was sent
	rounds := 0
	for ; ; rounds++ {
		var r struct {
			Result struct{ RequestState string }
			Error  struct{ Code int }
		}
		_ = json.Unmarshal([]byte(body), &r)
		if r.Result.RequestState == "" {
			// Refused, and not before its time ran out: InputWait after
			// it was parked, which was after before.
			if r.Error.Code != -32602 || time.Since(before) < cfg.Gateway.InputWait {
				t.Fatalf("round %d after %v: %s", rounds, time.Since(start), body)
			}
			break
		}
		// The request's time ran out InputWait after it was parked,
		// before start: a retry sent well after that must not park it
		// again. Measured when the retry was sent, not when its answer
		// came: a busy machine may take long to answer it.
		if sent.Sub(start) > 5*cfg.Gateway.InputWait {
			t.Fatalf("still parked by a retry sent %v after the first answer, with InputWait %v", sent.Sub(start), cfg.Gateway.InputWait)
		}
		time.Sleep(100 * time.Millisecond) // the client's pace between retries
		st, _ := json.Marshal(r.Result.RequestState)
		sent = time.Now()
		_, body, _ = atkModern(g, 10*time.Second, "s", strconv.Itoa(rounds+2), "sample", `{"prompt":"p"}`, `,"inputResponses":{},"requestState":`+string(st))
	}
	testkit.WaitFor(t, "no request pending upstream after the parked one ran out of time", func() bool { return g.pending("s") == 0 })

	// Another client can be asked for sampling again.
	if _, body, _ := atkModern(g, 10*time.Second, "s", "100", "sample", `{"prompt":"x"}`, ""); !strings.Contains(body, "input_required") {
		t.Errorf("another client's sampling after the parked request ended: %s", body)
	}
}
