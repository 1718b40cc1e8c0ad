package eras

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/seal"
)

// passRing is a ring of keys.
func passRing(t *testing.T, keys ...seal.Key) *seal.Ring {
	t.Helper()
	r, err := seal.New(keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// passKey is a key of id whose secret is b repeated.
func passKey(id string, b byte, primary bool) seal.Key {
	return seal.Key{ID: id, Secret: bytes.Repeat([]byte{b}, seal.KeySize), Primary: primary}
}

// TestPassStateBinding: a passthrough server's requestState, sealed for
// the reply's target and principal, opens for a retry of both only: not
// on another target (an endpoint of the same principal, say), not for
// another principal, not once its key is retired by a rotation, and the
// server gets back its state as it wrote it.
func TestPassStateBinding(t *testing.T) {
	ring := passRing(t, passKey("k1", 1, true))
	p := &Parking[string]{Ring: ring}
	reply := p.sealReply([]byte(`{"jsonrpc":"2.0","id":"c","result":{"resultType":"input_required","requestState":"srv:x1"}}`), "server:a", "alice")
	var r struct {
		Result struct{ RequestState string } `json:"result"`
	}
	if err := json.Unmarshal(reply, &r); err != nil || r.Result.RequestState == "" || r.Result.RequestState == "srv:x1" {
		t.Fatalf("sealed reply %s: the client must get the state sealed", reply)
	}
	state, _ := json.Marshal(r.Result.RequestState)
	retry, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"t","requestState":` + string(state) + `,"inputResponses":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ target, owner string }{{"server:b", "alice"}, {"endpoint:a", "alice"}, {"server:a", "bob"}, {"server:a", ""}} {
		if _, ok := p.unsealRetry(&retry, tt.target, tt.owner); ok {
			t.Errorf("the state opened on %s for %q; it was sealed for server:a and alice", tt.target, tt.owner)
		}
	}
	own, ok := p.unsealRetry(&retry, "server:a", "alice")
	if !ok || !bytes.Contains(own.Raw, []byte(`"requestState":"srv:x1"`)) {
		t.Fatalf("the retry of its own principal on its own target: %v %s, want the server's state back", ok, own.Raw)
	}

	// A rotation that keeps k1 keeps the state; one that retires it
	// refuses it as a forged one is.
	if err := ring.SetKeys([]seal.Key{passKey("k2", 2, true), passKey("k1", 1, false)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.unsealRetry(&retry, "server:a", "alice"); !ok {
		t.Error("the state stopped opening while its key is still listed")
	}
	if err := ring.SetKeys([]seal.Key{passKey("k2", 2, true)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.unsealRetry(&retry, "server:a", "alice"); ok {
		t.Error("the state opened after its key was retired")
	}
}
