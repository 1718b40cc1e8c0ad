package servers

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// The pure parts of a pool's placement (sessionpool.go): the order of
// the processes and what counts as a capable session.

// TestPlaceKeyOrder: the order a new session's process is chosen in.
func TestPlaceKeyOrder(t *testing.T) {
	for _, tc := range []struct {
		name        string
		better, not placeKey
	}{
		{"up before down", placeKey{down: false, sessions: 9, capable: 9}, placeKey{down: true}},
		{"fewer capable sessions", placeKey{capable: 0, sessions: 5}, placeKey{capable: 1, sessions: 0}},
		{"no capable session", placeKey{shared: false, sessions: 5}, placeKey{shared: true, sessions: 0}},
		{"fewer sessions", placeKey{sessions: 1, inFlight: 9}, placeKey{sessions: 2}},
		{"fewer in flight", placeKey{sessions: 1, inFlight: 0}, placeKey{sessions: 1, inFlight: 1}},
	} {
		if !tc.better.less(tc.not) || tc.not.less(tc.better) {
			t.Errorf("%s: %+v should come before %+v", tc.name, tc.better, tc.not)
		}
	}
	if k := (placeKey{sessions: 1}); k.less(k) {
		t.Error("a key comes before itself")
	}
}

// FuzzDeclaresCapability: whatever a client's first message holds,
// reading its capabilities never panics, and only an initialize request
// declaring sampling, elicitation or roots counts.
func FuzzDeclaresCapability(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"sampling":{}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"roots":{"listChanged":true}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"elicitation":null}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"elicitation":{"url":{}}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":[]}}`,
		`{"jsonrpc":"2.0","method":"initialize","params":{"capabilities":{"sampling":{}}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"capabilities":{"sampling":{}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initi\u0061lize","params":{"capabilities":{"sampling":{}}}}`,
	} {
		f.Add([]byte(seed))
	}
	for raw, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"sampling":{}}}}`:            true,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"elicitation":{"url":{}}}}}`: true,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"roots":{}}}}`:               true,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"elicitation":null}}}`:       false,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"experimental":{}}}}`:        false,
		`{"jsonrpc":"2.0","method":"initialize","params":{"capabilities":{"sampling":{}}}}`:                   false,
	} {
		msg, err := jsonrpc.Parse([]byte(raw))
		if err != nil {
			f.Fatal(err)
		}
		if got := declaresCapability(&msg); got != want {
			f.Errorf("declaresCapability(%s) = %v, want %v", raw, got, want)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		msg, err := jsonrpc.Parse(raw)
		if err != nil {
			return
		}
		got := declaresCapability(&msg)
		if got && (msg.Kind != jsonrpc.KindRequest || msg.MethodName() != "initialize") {
			t.Fatalf("%s counts as declaring a capability", raw)
		}
	})
}
