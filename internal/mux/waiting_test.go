package mux

import (
	"bytes"
	"context"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// TestClientCapabilitiesOption: the gateway's initialize of a shared
// upstream declares Options.ClientCapabilities when set, else every
// capability it can route.
func TestClientCapabilitiesOption(t *testing.T) {
	for _, tt := range []struct{ opt, want string }{
		{`{"sampling":{}}`, `"capabilities":{"sampling":{}}`},
		{`{}`, `"capabilities":{}`},
		{"", `"capabilities":` + gatewayCapabilities},
	} {
		var opts Options
		if tt.opt != "" {
			opts.ClientCapabilities = []byte(tt.opt)
		}
		_, up := startShared(t, opts)
		up.mu.Lock()
		inits := up.writtenLocked("initialize")
		up.mu.Unlock()
		if len(inits) != 1 || !bytes.Contains(inits[0].Raw, []byte(tt.want)) {
			t.Errorf("option %q: %d initialize written (%v), want one with %s", tt.opt, len(inits), inits, tt.want)
		}
	}
}

// TestServerRequestsCount: ServerRequests counts the server requests
// routed to a client and not answered yet: an answer or the client's
// Close ends the wait.
func TestServerRequestsCount(t *testing.T) {
	m, up := startShared(t, Options{})
	c, _ := initClient(t, m, `{"sampling":{}}`)
	out := newRec()
	c.Handle(context.Background(), request(t, "1", "tools/call", `{}`), out)
	writtenID(t, up, "tools/call", 0)
	if n := m.ServerRequests(); n != 0 {
		t.Fatalf("ServerRequests %d before any", n)
	}
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}`))
	m.Line(1, []byte(`{"jsonrpc":"2.0","id":"s2","method":"sampling/createMessage","params":{}}`))
	if n := m.ServerRequests(); n != 2 {
		t.Fatalf("ServerRequests %d with two routed, want 2", n)
	}
	out.mu.Lock()
	first, err := jsonrpc.Parse(out.sends[0])
	out.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	answer, err := jsonrpc.Parse(jsonrpc.Response(first.Bytes(first.ID), []byte(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	c.Handle(context.Background(), &answer, nil)
	if n := m.ServerRequests(); n != 1 {
		t.Errorf("ServerRequests %d after one answer, want 1", n)
	}
	c.Close()
	if n := m.ServerRequests(); n != 0 {
		t.Errorf("ServerRequests %d after the client closed, want 0", n)
	}
}
