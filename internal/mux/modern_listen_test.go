package mux

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// Tests of modern_listen.go: client listens served from the gateway's own
// listen, against a scripted upstream.

const (
	toolsChanged   = "notifications/tools/list_changed"
	promptsChanged = "notifications/prompts/list_changed"
	acknowledged   = "notifications/subscriptions/acknowledged"
)

// listenOn sends client c a subscriptions/listen with raw id and filter.
func listenOn(t *testing.T, c *Client, id, filter string) *rec {
	t.Helper()
	out := newRec()
	c.Handle(context.Background(), request(t, id, "subscriptions/listen", `{"notifications":`+filter+`,`+atkMeta+`}`), out)
	return out
}

// gatewayListens returns the upstream ids and params of the listens
// written so far.
func gatewayListens(up *fakeUp) (ids, params []string) {
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, l := range up.writtenLocked("subscriptions/listen") {
		ids = append(ids, string(l.Bytes(l.ID)))
		params = append(params, string(paramsOf(l.Raw)))
	}
	return ids, params
}

// waitListens waits for n gateway listens and returns the last one's id.
func waitListens(t *testing.T, up *fakeUp, n int) string {
	t.Helper()
	var id string
	up.waitFor(t, fmt.Sprintf("%d gateway listens", n), func() bool {
		ls := up.writtenLocked("subscriptions/listen")
		if len(ls) >= n {
			id = string(ls[n-1].Bytes(ls[n-1].ID))
		}
		return len(ls) >= n
	})
	return id
}

// cancelsWritten returns the requestIds of the notifications/cancelled
// written upstream.
func cancelsWritten(up *fakeUp) []string {
	up.mu.Lock()
	defer up.mu.Unlock()
	var ids []string
	for _, c := range up.writtenLocked("notifications/cancelled") {
		ids = append(ids, string(c.Bytes(c.CancelRequestID)))
	}
	return ids
}

// ack is the server's acknowledgement of gateway listen id, agreeing to
// agreed (a filter; "" for none said).
func ack(id, agreed string) []byte {
	if agreed != "" {
		agreed = `,"notifications":` + agreed
	}
	return []byte(`{"jsonrpc":"2.0","method":"` + acknowledged + `","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}` + agreed + `}}`)
}

// clientAck is the acknowledgement a client listen with raw id gets.
func clientAck(id, agreed string) string {
	return `{"jsonrpc":"2.0","method":"` + acknowledged + `","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `},"notifications":` + agreed + `}}`
}

// note is a notification for a listen with subscription id sub.
func note(method, sub, extra string) string {
	return `{"jsonrpc":"2.0","method":"` + method + `","params":{` + extra + `"_meta":{"io.modelcontextprotocol/subscriptionId":` + sub + `}}}`
}

// waitSends waits until r holds n messages and returns them.
func (r *rec) waitSends(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		if len(r.sends) >= n {
			out := make([]string, len(r.sends))
			for i, s := range r.sends {
				out[i] = string(s)
			}
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("timed out waiting for %d messages", n)
		}
	}
}

// expectSends checks that r got exactly want.
func expectSends(t *testing.T, name string, r *rec, want ...string) {
	t.Helper()
	got := r.waitSends(t, len(want))
	if len(got) != len(want) {
		t.Errorf("%s got %d messages, want %d:\n got %q\nwant %q", name, len(got), len(want), got, want)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s's message %d:\n got %s\nwant %s", name, i, got[i], want[i])
		}
	}
}

// TestListenFanOutByFilter: two clients with the colliding listen id "L"
// and different filters. The first opens the gateway's listen; the second
// wants more, so that listen is cancelled and, once the server ended it,
// the next opens with the union. Each client is acknowledged once, with
// what it asked for, and gets only what it asked for, tagged "L".
func TestListenFanOutByFilter(t *testing.T) {
	m, up := atkReady(t, Options{})
	outA := listenOn(t, modernClient(t, m), `"L"`, `{"toolsListChanged":true}`)
	u1 := waitListens(t, up, 1)
	_, params := gatewayListens(up)
	for _, want := range []string{`"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"io.modelcontextprotocol/clientCapabilities":{}`, `"notifications":{"toolsListChanged":true}`} {
		if !strings.Contains(params[0], want) {
			t.Errorf("the gateway's listen %s lacks %s", params[0], want)
		}
	}
	m.Line(1, ack(u1, `{"toolsListChanged":true}`))
	expectSends(t, "A", outA, clientAck(`"L"`, `{"toolsListChanged":true}`))

	outB := listenOn(t, modernClient(t, m), `"L"`, `{"promptsListChanged":true,"resourceSubscriptions":["file:///dir/"]}`)
	if got := cancelsWritten(up); len(got) != 1 || got[0] != u1 {
		t.Fatalf("cancelled upstream %q, want the first listen %s", got, u1)
	}
	if ids, _ := gatewayListens(up); len(ids) != 1 {
		t.Fatalf("%d listens written before the first ended, want 1", len(ids))
	}
	m.Line(1, []byte(note(toolsChanged, u1, ""))) // a cancelled listen's: nobody's
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+u1+`,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":`+u1+`}}}`))
	u2 := waitListens(t, up, 2)
	_, params = gatewayListens(up)
	if want := `"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["file:///dir/"]}`; !strings.Contains(params[1], want) {
		t.Errorf("the second listen %s, want the union %s", params[1], want)
	}
	m.Line(1, ack(u2, `{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["file:///dir/"]}`))
	expectSends(t, "B", outB, clientAck(`"L"`, `{"promptsListChanged":true,"resourceSubscriptions":["file:///dir/"]}`))

	for _, line := range []string{
		note(toolsChanged, u2, ""),
		note(promptsChanged, u2, ""),
		note("notifications/resources/updated", u2, `"uri":"file:///dir/a.txt",`),
		note("notifications/resources/updated", u2, `"uri":"file:///dirt",`),  // not under file:///dir/
		note("notifications/resources/list_changed", u2, ""),                  // nobody asked
		note("notifications/progress", u2, `"progressToken":1,"progress":1,`), // never on a listen
	} {
		m.Line(1, []byte(line))
	}
	expectSends(t, "A", outA, clientAck(`"L"`, `{"toolsListChanged":true}`), note(toolsChanged, `"L"`, ""))
	expectSends(t, "B", outB, clientAck(`"L"`, `{"promptsListChanged":true,"resourceSubscriptions":["file:///dir/"]}`),
		note(promptsChanged, `"L"`, ""), note("notifications/resources/updated", `"L"`, `"uri":"file:///dir/a.txt",`))
	if n := m.Stats().DroppedNotifications; n != 4 {
		t.Errorf("DroppedNotifications = %d, want 4", n)
	}
	if ids, _ := gatewayListens(up); len(ids) != 2 {
		t.Errorf("%d gateway listens, want 2", len(ids))
	}
	if n := m.Pending(); n != 2 {
		t.Errorf("Pending = %d, want the 2 client listens", n)
	}
}

// TestListenUnionCovers: a client listen the open gateway listen covers
// opens none: it is acknowledged with the server's agreement (here: no
// prompts) intersected with what it asked, at once when that is known,
// else with the gateway listen's acknowledgement.
func TestListenUnionCovers(t *testing.T) {
	m, up := atkReady(t, Options{})
	outA := listenOn(t, modernClient(t, m), `1`, `{"toolsListChanged":true,"promptsListChanged":true}`)
	u := waitListens(t, up, 1)
	outC := listenOn(t, modernClient(t, m), `"c"`, `{"toolsListChanged":true}`)
	if n := outC.numSends(); n != 0 {
		t.Errorf("acknowledged before the server did: %d messages", n)
	}
	m.Line(1, ack(u, `{"toolsListChanged":true}`))
	expectSends(t, "A", outA, clientAck(`1`, `{"toolsListChanged":true}`))
	expectSends(t, "C", outC, clientAck(`"c"`, `{"toolsListChanged":true}`))
	outB := listenOn(t, modernClient(t, m), `"b"`, `{"promptsListChanged":true}`)
	expectSends(t, "B", outB, clientAck(`"b"`, `{}`))
	m.Line(1, []byte(note(promptsChanged, u, ""))) // the server agreed to none
	m.Line(1, []byte(note(toolsChanged, u, "")))
	expectSends(t, "A", outA, clientAck(`1`, `{"toolsListChanged":true}`), note(toolsChanged, `1`, ""))
	expectSends(t, "C", outC, clientAck(`"c"`, `{"toolsListChanged":true}`), note(toolsChanged, `"c"`, ""))
	if n := outB.numSends(); n != 1 {
		t.Errorf("B got %d messages, want its acknowledgement only", n)
	}
	if ids, _ := gatewayListens(up); len(ids) != 1 {
		t.Errorf("%d gateway listens, want 1", len(ids))
	}
	if c := cancelsWritten(up); len(c) != 0 {
		t.Errorf("cancelled upstream: %q", c)
	}
}

// TestListenLastLeaves: client listens ending (notifications/cancelled,
// Abandon, Close) tell the server nothing until the last one ends; then
// the gateway listen is cancelled. A client listen coming after opens the
// next only once the server ended the cancelled one, or retireWait passed.
func TestListenLastLeaves(t *testing.T) {
	m, up := atkReady(t, Options{})
	a, b := modernClient(t, m), modernClient(t, m)
	outA := listenOn(t, a, `"L"`, `{"toolsListChanged":true}`)
	outB := listenOn(t, b, `"L"`, `{"toolsListChanged":true}`)
	u1 := waitListens(t, up, 1)
	m.Line(1, ack(u1, ""))
	outB.waitSends(t, 1)
	cancel, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L"}}`))
	b.Handle(context.Background(), &cancel, nil)
	if r := outB.waitReplies(t, 1)[0]; r != nil {
		t.Errorf("B's cancelled listen answered %s", r)
	}
	m.Line(1, []byte(note(toolsChanged, u1, "")))
	if c := cancelsWritten(up); len(c) != 0 {
		t.Errorf("cancelled upstream with a client listen left: %q", c)
	}
	a.Abandon(outA)
	if c := cancelsWritten(up); len(c) != 1 || c[0] != u1 {
		t.Fatalf("cancelled upstream %q, want %s once the last client listen ended", c, u1)
	}
	if n := m.Pending(); n != 0 {
		t.Errorf("Pending = %d", n)
	}
	outA.mu.Lock()
	if len(outA.replies) != 0 || len(outA.sends) != 2 {
		t.Errorf("abandoned A got sends %q, replies %q; want its ack and the change, no reply", outA.sends, outA.replies)
	}
	outA.mu.Unlock()

	c := modernClient(t, m)
	outC := listenOn(t, c, `5`, `{"toolsListChanged":true}`)
	if ids, _ := gatewayListens(up); len(ids) != 1 {
		t.Fatalf("a listen opened before the cancelled one ended")
	}
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+u1+`,"result":{"resultType":"complete"}}`))
	u2 := waitListens(t, up, 2)
	m.Line(1, ack(u2, `{"toolsListChanged":true}`))
	expectSends(t, "C", outC, clientAck(`5`, `{"toolsListChanged":true}`))

	// A server that never ends a cancelled listen delays the next by retireWait.
	c.Close()
	if r := outC.waitReplies(t, 1)[0]; !strings.Contains(string(r), "session closed") {
		t.Errorf("C's listen after Close: %s", r)
	}
	if got := cancelsWritten(up); len(got) != 2 || got[1] != u2 {
		t.Fatalf("cancelled upstream %q, want %s last", got, u2)
	}
	start := time.Now()
	listenOn(t, modernClient(t, m), `6`, `{"toolsListChanged":true}`)
	waitListens(t, up, 3)
	if d := time.Since(start); d < retireWait/2 {
		t.Errorf("the next listen opened after %v, before retireWait (%v)", d, retireWait)
	}
	if n := m.Stats().UnknownReplies; n != 0 {
		t.Errorf("UnknownReplies = %d", n)
	}
}

// TestListenServerEnds: the server ending the gateway listen ends every
// client listen, each with its own id: its notifications/cancelled (then
// no reply, as a forwarded listen), its final result, or its error. The
// next client listen opens a fresh gateway listen at once.
func TestListenServerEnds(t *testing.T) {
	for name, tt := range map[string]struct {
		end       func(u string) string
		wantSends func(id string) []string
		wantReply func(id string) string
	}{
		"cancelled": {
			end: func(u string) string {
				return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + u + `,"reason":"bye"}}`
			},
			wantSends: func(id string) []string {
				return []string{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"bye"}}`}
			},
		},
		"result": {
			end: func(u string) string {
				return `{"jsonrpc":"2.0","id":` + u + `,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":` + u + `}}}`
			},
			wantReply: func(id string) string {
				return `{"jsonrpc":"2.0","id":` + id + `,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `}}}`
			},
		},
		"error": {
			end: func(u string) string {
				return `{"jsonrpc":"2.0","id":` + u + `,"error":{"code":-32603,"message":"boom"}}`
			},
			wantReply: func(id string) string {
				return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"boom"}}`
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			m, up := atkReady(t, Options{})
			outs := map[string]*rec{
				`"L"`: listenOn(t, modernClient(t, m), `"L"`, `{"toolsListChanged":true}`),
				`7`:   listenOn(t, modernClient(t, m), `7`, `{"toolsListChanged":true}`),
			}
			u := waitListens(t, up, 1)
			m.Line(1, ack(u, ""))
			m.Line(1, []byte(tt.end(u)))
			for id, out := range outs {
				reply := out.waitReplies(t, 1)[0]
				want := []string{clientAck(id, `{"toolsListChanged":true}`)}
				if tt.wantSends != nil {
					want = append(want, tt.wantSends(id)...)
					if reply != nil {
						t.Errorf("%s: replied %s after the server's cancellation, want no reply", id, reply)
					}
				} else if string(reply) != tt.wantReply(id) {
					t.Errorf("%s: reply %s, want %s", id, reply, tt.wantReply(id))
				}
				expectSends(t, id, out, want...)
			}
			if n := m.Pending(); n != 0 {
				t.Errorf("Pending = %d", n)
			}
			listenOn(t, modernClient(t, m), `8`, `{"toolsListChanged":true}`)
			waitListens(t, up, 2)
			if c := cancelsWritten(up); len(c) != 0 {
				t.Errorf("cancelled upstream: %q", c)
			}
		})
	}
}

// TestListenRestart: the process's exit answers every client listen with
// an error; a client listen on the next process opens a fresh gateway
// listen there. Close answers the open ones too.
func TestListenRestart(t *testing.T) {
	m, up := atkReady(t, Options{})
	outA := listenOn(t, modernClient(t, m), `"L"`, `{"toolsListChanged":true}`)
	outB := listenOn(t, modernClient(t, m), `"L"`, `{"promptsListChanged":true}`)
	u1 := waitListens(t, up, 1)
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+u1+`,"result":{}}`)) // cancelled for B: ended
	u2 := waitListens(t, up, 2)
	m.Line(1, ack(u2, ""))
	m.Exited(1, errors.New("exit status 2"))
	for name, out := range map[string]*rec{"A": outA, "B": outB} {
		if _, text, isErr := errorCode(t, out.waitReplies(t, 1)[0]); !isErr || !strings.Contains(text, "exit status 2") {
			t.Errorf("%s: %q, want an error naming the exit", name, text)
		}
	}
	if n := m.Pending(); n != 0 {
		t.Errorf("Pending = %d after the exit", n)
	}
	m.Line(1, []byte(note(toolsChanged, u2, ""))) // a dead process's: nobody's
	up.gen.Store(2)
	m.Started(2)
	if _, err := discovered(t, m); err != nil {
		t.Fatal(err)
	}
	outC := listenOn(t, modernClient(t, m), `"L"`, `{"toolsListChanged":true}`)
	u3 := waitListens(t, up, 3)
	if u3 == u2 {
		t.Fatal("no fresh listen")
	}
	m.Line(2, ack(u3, ""))
	m.Line(2, []byte(note(toolsChanged, u3, "")))
	expectSends(t, "C", outC, clientAck(`"L"`, `{"toolsListChanged":true}`), note(toolsChanged, `"L"`, ""))
	m.Close()
	if _, text, isErr := errorCode(t, outC.waitReplies(t, 1)[0]); !isErr || !strings.Contains(text, "shutting down") {
		t.Errorf("C after Close: %q", text)
	}
	for name, out := range map[string]*rec{"A": outA, "B": outB} {
		if n := out.numSends(); n != 1 {
			t.Errorf("%s got %d messages, want its acknowledgement only", name, n)
		}
	}
}

// TestListenAckTimeout: a gateway listen the server does not acknowledge
// within the request timeout answers its client listens with a timeout,
// and is cancelled upstream.
func TestListenAckTimeout(t *testing.T) {
	m, up := atkReady(t, Options{Timeout: 100 * time.Millisecond})
	out := listenOn(t, modernClient(t, m), `"L"`, `{"toolsListChanged":true}`)
	u := waitListens(t, up, 1)
	if code, _, isErr := errorCode(t, out.waitReplies(t, 1)[0]); !isErr || code != protocol.CodeRequestTimeout {
		t.Errorf("reply code %d, want a timeout", code)
	}
	up.waitFor(t, "the cancellation", func() bool {
		cs := up.writtenLocked("notifications/cancelled")
		return len(cs) == 1 && string(cs[0].Bytes(cs[0].CancelRequestID)) == u
	})
	if n := out.numSends(); n != 0 {
		t.Errorf("%d messages before the timeout", n)
	}
}

// TestListenInvalidParams: a listen without params.notifications is
// refused; nothing reaches the server.
func TestListenInvalidParams(t *testing.T) {
	m, up := atkReady(t, Options{})
	out := newRec()
	modernClient(t, m).Handle(context.Background(), request(t, "1", "subscriptions/listen", `{`+atkMeta+`}`), out)
	if code, _, _ := errorCode(t, out.waitReplies(t, 1)[0]); code != protocol.CodeInvalidParams {
		t.Errorf("code %d, want -32602", code)
	}
	if ids, _ := gatewayListens(up); len(ids) != 0 {
		t.Errorf("listens written: %q", ids)
	}
}

// TestListenAckFirst: client listens joining an acknowledged gateway listen
// while its notifications stream in get their acknowledgement first, and
// every message tagged with their own id.
func TestListenAckFirst(t *testing.T) {
	m, up := atkReady(t, Options{})
	listenOn(t, modernClient(t, m), `0`, `{"toolsListChanged":true}`)
	u := waitListens(t, up, 1)
	m.Line(1, ack(u, ""))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the upstream reader
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				m.Line(1, []byte(note(toolsChanged, u, "")))
			}
		}
	}()
	var outs []*rec
	for i := 1; i <= 50; i++ {
		outs = append(outs, listenOn(t, modernClient(t, m), fmt.Sprint(i), `{"toolsListChanged":true}`))
	}
	for _, out := range outs {
		out.waitSends(t, 2)
	}
	close(stop)
	wg.Wait()
	for i, out := range outs {
		id := fmt.Sprint(i + 1)
		got := out.waitSends(t, 2)
		if got[0] != clientAck(id, `{"toolsListChanged":true}`) {
			t.Errorf("listen %s's first message %s", id, got[0])
		}
		for _, s := range got[1:] {
			if s != note(toolsChanged, id, "") {
				t.Errorf("listen %s got %s", id, s)
			}
		}
	}
}
