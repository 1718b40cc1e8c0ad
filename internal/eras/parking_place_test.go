package eras

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/seal"
)

// parkOn parks a translated tools/call that asks for sampling on p, and
// returns its retry (the answer given, the state p sealed).
func parkOn(t *testing.T, p *Parking[string]) string {
	t.Helper()
	sc := &askingSC{}
	msg, req := checked(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t",`+statelessMeta+`}}`)
	st := newWaitStream()
	if _, prob := p.Serve(context.Background(), sc.stateless(), msg, req, Origin[string]{Session: "s1", Target: "srv", Owner: "alice"}, st); prob != nil {
		t.Fatal(prob)
	}
	var ir struct {
		Result struct {
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal(st.wait(t), &ir); err != nil || len(ir.Result.InputRequests) != 1 {
		t.Fatalf("first answer: %v %+v", err, ir)
	}
	var key string
	for k := range ir.Result.InputRequests {
		key = k
	}
	return `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","inputResponses":{` + string(mustQuote(key)) +
		`:{"model":"m","role":"assistant","content":{"type":"text","text":"hi"}}},"requestState":` + string(mustQuote(ir.Result.RequestState)) + `,` + statelessMeta + `}}`
}

// A request parked on one replica is found from its retry on another: the
// state, opened by the shared ring, names the first replica's place; the
// replica holding it (and one without a place) serves the retry itself.
func TestParkedRequestElsewhere(t *testing.T) {
	ring := seal.NewRandom()
	release := func(string, string) {}
	a := &Parking[string]{Ring: ring, Wait: time.Minute, Release: release, Place: []byte("replica-a\x00127.0.0.1:1")}
	b := &Parking[string]{Ring: ring, Wait: time.Minute, Release: release, Place: []byte("replica-b\x00127.0.0.1:2")}
	defer a.Close()
	defer b.Close()
	retry := parkOn(t, a)
	rmsg, rreq := checked(t, retry)

	if got := string(b.Elsewhere(rmsg)); got != string(a.Place) {
		t.Errorf("b.Elsewhere = %q, want a's place %q", got, a.Place)
	}
	if got := a.Elsewhere(rmsg); got != nil {
		t.Errorf("a.Elsewhere = %q, want nil: the request is parked there", got)
	}
	if r := b.Route((&askingSC{}).stateless(), rmsg, rreq); r != RouteResume {
		t.Errorf("b.Route(retry) = %v, want RouteResume: the state is the gateway's", r)
	}
	if _, prob := b.Unpark(rmsg, "srv", "alice"); prob == nil || prob.Status != http.StatusBadRequest {
		t.Errorf("b.Unpark: %+v, want 400: the request is not parked there", prob)
	}
	if x, prob := a.Unpark(rmsg, "srv", "alice"); prob != nil || x == nil {
		t.Fatalf("a.Unpark: %+v", prob)
	} else {
		a.End(x, "test over")
	}
	// Taken: a answers a second retry itself (the state does not open
	// twice), which b, knowing nothing of it, still sends there.
	if got := a.Elsewhere(rmsg); got != nil {
		t.Errorf("after the retry was taken: a.Elsewhere = %q, want nil (its own place)", got)
	}

	// A parking without a place seals the state of before, which opens
	// everywhere and names no place.
	c := &Parking[string]{Ring: ring, Wait: time.Minute, Release: release}
	defer c.Close()
	plain := parkOn(t, c)
	pmsg, preq := checked(t, plain)
	if got := b.Elsewhere(pmsg); got != nil {
		t.Errorf("a state of no place: b.Elsewhere = %q, want nil", got)
	}
	if r := b.Route((&askingSC{}).stateless(), pmsg, preq); r != RouteResume {
		t.Errorf("b.Route(a state of no place) = %v, want RouteResume", r)
	}
	if x, prob := c.Unpark(pmsg, "srv", "alice"); prob != nil {
		t.Fatalf("c.Unpark: %+v", prob)
	} else {
		c.End(x, "test over")
	}

	// A place too long is not sealed: the state has none.
	d := &Parking[string]{Ring: ring, Wait: time.Minute, Release: release, Place: []byte(strings.Repeat("x", MaxPlace+1))}
	defer d.Close()
	long := parkOn(t, d)
	lmsg, _ := checked(t, long)
	if got := b.Elsewhere(lmsg); got != nil {
		t.Errorf("a place over MaxPlace: b.Elsewhere = %q, want nil", got)
	}
}
