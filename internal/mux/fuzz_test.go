package mux

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// FuzzUpstreamLine feeds whatever a server might write to the multiplexer:
// it never panics, a line answers at most the one call it names, and a
// reply reaches the client with the client's own id.
func FuzzUpstreamLine(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":2,"result":{}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":2,"progress":1}}`,
		`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`,
		`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error"}}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s1"}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","id":18446744073709551615,"result":{}}`,
		`not json`,
		`{"id":2,"result":`,
	} {
		f.Add([]byte(seed), false)
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"result":{"big":"`), true)
	f.Fuzz(func(t *testing.T, line []byte, oversized bool) {
		m := New(Options{Name: "fuzz"})
		defer m.Close()
		up := &silent{m: m}
		m.SetUpstream(testkit.Genless(up))
		m.Started(1)
		out := &collect{done: make(chan struct{}, 16)}
		c := m.Join(out)
		req, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"mine","method":"tools/call","params":{"_meta":{"progressToken":"t"}}}`))
		c.Handle(context.Background(), &req, out)
		if oversized {
			m.Oversized(1, line, len(line)+1)
		} else {
			m.Line(1, line)
		}
		out.mu.Lock()
		defer out.mu.Unlock()
		if len(out.replies) > 1 || len(out.replies)+m.Pending() != 1 {
			t.Fatalf("%d replies and %d pending for one call", len(out.replies), m.Pending())
		}
		for _, r := range out.replies {
			msg, err := jsonrpc.Parse(r)
			if err != nil || string(msg.Bytes(msg.ID)) != `"mine"` {
				t.Fatalf("reply %s (%v) does not carry the client's id", r, err)
			}
		}
	})
}
