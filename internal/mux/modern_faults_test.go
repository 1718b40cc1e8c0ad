package mux

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Attack tests of the Modern Mux (modern.go, modern_route.go).

const atkMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// atkReady is a ready Modern Mux over a fake upstream.
func atkReady(t *testing.T, opts Options) (*Mux, *fakeUp) {
	t.Helper()
	m, up := startModern(t, opts, result(discoverResult))
	if _, err := discovered(t, m); err != nil {
		t.Fatal(err)
	}
	return m, up
}

// atkListen opens a listen with client id id on a new client and returns
// its stream and the upstream id the server saw.
func atkListen(t *testing.T, m *Mux, up *fakeUp, id string) (*rec, *Client, string) {
	t.Helper()
	c := modernClient(t, m)
	out := newRec()
	up.mu.Lock()
	before := len(up.writtenLocked("subscriptions/listen"))
	up.mu.Unlock()
	c.Handle(context.Background(), request(t, id, "subscriptions/listen", `{"notifications":{"toolsListChanged":true},`+atkMeta+`}`), out)
	var upID string
	up.waitFor(t, "the listen", func() bool {
		ls := up.writtenLocked("subscriptions/listen")
		if len(ls) > before {
			upID = string(ls[before].Bytes(ls[before].ID))
			return true
		}
		return false
	})
	return out, c, upID
}

func tagged(method, sub, extra string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"` + method + `","params":{` + extra + `"_meta":{"io.modelcontextprotocol/subscriptionId":` + sub + `}}}`)
}

// TestAttackTaggedServerCancelEndsListen: a 2026-07-28 server MUST tag
// every notification of a listen with its subscriptionId, so the server's
// own notifications/cancelled ending a listen may carry the tag too (it is
// a notification on the listen's stream). It must end the listen like the
// untagged one does: the stream gets it with the client's id (requestId
// included) and the listen ends with no reply; nothing stays pending.
func TestAttackTaggedServerCancelEndsListen(t *testing.T) {
	m, up := atkReady(t, Options{})
	out, _, upID := atkListen(t, m, up, `"L"`)
	m.Line(1, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+upID+`,"reason":"bye","_meta":{"io.modelcontextprotocol/subscriptionId":`+upID+`}}}`))
	testkit.WaitFor(t, "the listen the server ended (tagged notifications/cancelled) to end", func() bool {
		out.mu.Lock()
		defer out.mu.Unlock()
		return len(out.replies) > 0
	})
	out.mu.Lock()
	replies, sends := len(out.replies), append([][]byte(nil), out.sends...)
	out.mu.Unlock()
	for _, s := range sends {
		if bytes.Contains(s, []byte(`"requestId":`+upID)) {
			t.Errorf("the stream got the gateway's upstream id as requestId: %s", s)
		}
	}
	if replies != 1 {
		t.Errorf("the listen the server ended (tagged notifications/cancelled) is still open: %d replies, %d pending; sends %q", replies, m.Pending(), sends)
	}
	if n := m.Pending(); n != 0 {
		t.Errorf("%d pending after the server ended the only listen", n)
	}
}

// TestAttackForeignSubscriptionIDs: tags naming a non-listen request of
// another client, a non-existent listen, a non-number/non-string, or the
// upstream id as a string, never reach any client's request stream.
func TestAttackForeignSubscriptionIDs(t *testing.T) {
	m, up := atkReady(t, Options{})
	outL, _, upL := atkListen(t, m, up, `"L"`)
	// Another client with a tools/call in flight (unanswered).
	other := modernClient(t, m)
	outC := newRec()
	other.Handle(context.Background(), request(t, `"L"`, "tools/call", `{"name":"x",`+atkMeta+`}`), outC)
	var upC string
	up.waitFor(t, "the call", func() bool {
		cs := up.writtenLocked("tools/call")
		if len(cs) == 1 {
			upC = string(cs[0].Bytes(cs[0].ID))
		}
		return len(cs) == 1
	})
	for _, tag := range []string{upC, "999999", `"` + upL + `"`, upL + ".0", `{"x":1}`, `[` + upL + `]`, `null`, `true`} {
		m.Line(1, tagged("notifications/resources/updated", tag, `"uri":"file:///x",`))
	}
	time.Sleep(50 * time.Millisecond) // room for a misrouted notification to show; passing does not need it
	if n := outC.numSends(); n != 0 {
		outC.mu.Lock()
		t.Errorf("the other client's tools/call stream got %d tagged notifications meant for no call: %q", n, outC.sends)
		outC.mu.Unlock()
	}
	if n := outL.numSends(); n != 0 {
		outL.mu.Lock()
		t.Errorf("the listen got %d notifications with foreign tags: %q", n, outL.sends)
		outL.mu.Unlock()
	}
}

// TestAttackStaleVerdictAcrossGenerations: generation 1 answered "not
// modern"; generation 2 is being probed (no answer yet). Discovered must
// wait for generation 2's probe, not return generation 1's verdict.
func TestAttackStaleVerdictAcrossGenerations(t *testing.T) {
	m, up := startModern(t, Options{ProbeTimeout: 3 * time.Second}, rpcErr(-32601, "Method not found"))
	if _, err := discovered(t, m); !errors.Is(err, ErrNotModern) {
		t.Fatalf("gen 1: %v", err)
	}
	m.Exited(1, errors.New("exit status 1"))
	up.answer("server/discover", func(string) []byte { return nil }) // gen 2 answers late
	up.gen.Store(2)
	m.Started(2)
	up.waitFor(t, "gen 2's probe", func() bool { return len(up.writtenLocked("server/discover")) == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := m.Discovered(ctx)
	if errors.Is(err, ErrNotModern) && strings.Contains(err.Error(), "-32601") {
		t.Errorf("Discovered during gen 2's probe returned gen 1's verdict: %v", err)
	}
}
