package mux

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A reply over the line limit is reported with its first bytes only, and
// the call it answers is failed when those bytes name its id. An "id"
// inside the result (a tool's content that lists records with ids, before
// the reply's own id, which comes after the huge result) names no call:
// failing the call of that number would give another client an error for
// a call its server is still answering, and drop the real reply when it
// comes. Only the envelope's id counts.
func TestOversizedReplyFailsOnlyTheCallItsEnvelopeNames(t *testing.T) {
	m := New(Options{Name: "oversized"})
	defer m.Close()
	up := &silent{m: m}
	m.SetUpstream(testkit.Genless(up))
	m.Started(1)
	outA, outB := &collect{done: make(chan struct{}, 4)}, &collect{done: make(chan struct{}, 4)}
	a, b := m.Join(outA), m.Join(outB)
	for _, x := range []struct {
		c   *Client
		out *collect
		id  string
	}{{a, outA, "a"}, {b, outB, "b"}} {
		req, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"` + x.id + `","method":"tools/call","params":{"name":"t` + x.id + `"}}`))
		if err != nil {
			t.Fatal(err)
		}
		x.c.Handle(context.Background(), &req, x.out)
	}
	var upA, upB string
	testkit.WaitFor(t, "both calls sent upstream", func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		if len(up.sent) < 2 {
			return false
		}
		for _, s := range up.sent {
			msg, _ := jsonrpc.Parse(s)
			switch {
			case strings.Contains(string(s), `"name":"ta"`):
				upA = string(msg.Bytes(msg.ID))
			case strings.Contains(string(s), `"name":"tb"`):
				upB = string(msg.Bytes(msg.ID))
			}
		}
		return upA != "" && upB != ""
	})
	for _, prefix := range []string{
		// B's number inside A's result; A's own id after the cut.
		`{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"row","id":` + upB + `,"more":"` + strings.Repeat("x", 3000),
		// The same in an array of records, and in a string that looks like one.
		`{"jsonrpc":"2.0","result":{"rows":[{"id":` + upB + `},{"id":` + upB + `}],"more":"` + strings.Repeat("y", 3000),
		`{"jsonrpc":"2.0","result":{"text":"{\"id\":` + upB + `}","more":"` + strings.Repeat("z", 3000),
	} {
		m.Oversized(1, []byte(prefix), 20<<20)
	}
	if n := m.Pending(); n != 2 {
		outB.mu.Lock()
		got := fmt.Sprintf("%q", outB.replies)
		outB.mu.Unlock()
		t.Fatalf("%d calls pending after oversized lines that name no call by their envelope, want 2; b got %s", n, got)
	}
	// b's real reply still reaches b, with b's id.
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+upB+`,"result":{"ok":true}}`))
	testkit.Receive(t, outB.done, "b's reply")
	outB.mu.Lock()
	defer outB.mu.Unlock()
	if len(outB.replies) != 1 || !strings.Contains(string(outB.replies[0]), `"ok":true`) || !strings.Contains(string(outB.replies[0]), `"id":"b"`) {
		t.Fatalf("b got %q, want its own reply", outB.replies)
	}
	// An oversized reply whose envelope names a's id first fails a, once.
	m.Oversized(1, []byte(`{"jsonrpc":"2.0","id":`+upA+`,"result":{"id":`+upB+`,"big":"`), 20<<20)
	testkit.Receive(t, outA.done, "a's error")
	outA.mu.Lock()
	defer outA.mu.Unlock()
	if len(outA.replies) != 1 || !strings.Contains(string(outA.replies[0]), "exceeds the line limit") {
		t.Fatalf("a got %q, want the line-limit error", outA.replies)
	}
}
