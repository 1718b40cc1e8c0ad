package authserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcpgate/mcpgate/internal/seal"
)

func ringKey(id string, b byte, primary bool) seal.Key {
	return seal.Key{ID: id, Secret: bytes.Repeat([]byte{b}, seal.KeySize), Primary: primary}
}

// kidOf is the key id in an access token's header.
func kidOf(t *testing.T, access string) string {
	t.Helper()
	tok, err := jose.ParseSigned(access, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Signatures[0].Header.KeyID
}

// jwksIDs are the key ids the JWKS endpoint lists.
func (w *world) jwksIDs() []string {
	w.t.Helper()
	rec := w.get("/oauth/jwks")
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(rec.Body.Bytes(), &set); err != nil || rec.Code != http.StatusOK {
		w.t.Fatalf("jwks: %d %s", rec.Code, rec.Body)
	}
	var ids []string
	for _, k := range set.Keys {
		if k.Algorithm != "EdDSA" || k.Use != "sig" || !k.IsPublic() {
			w.t.Errorf("jwks key %+v: want a public EdDSA signing key", k)
		}
		ids = append(ids, k.KeyID)
	}
	return ids
}

// TestKeyRotation: the ring's rotation (add, promote, retire) rotates
// the signing keys: tokens of the old primary verify while its key is in
// the ring, and the JWKS lists every key of the ring.
func TestKeyRotation(t *testing.T) {
	ring, err := seal.New([]seal.Key{ringKey("k1", 1, true)})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, ring, nil, nil)
	old, _ := w.tokens()
	if kid := kidOf(t, old); kid != "k1" {
		t.Fatalf("kid %q, want k1", kid)
	}
	if ids := w.jwksIDs(); !slices.Equal(ids, []string{"k1"}) {
		t.Fatalf("jwks %v", ids)
	}
	// Add k2, then promote it.
	if err := ring.SetKeys([]seal.Key{ringKey("k1", 1, true), ringKey("k2", 2, false)}); err != nil {
		t.Fatal(err)
	}
	if ids := w.jwksIDs(); !slices.Equal(ids, []string{"k1", "k2"}) {
		t.Fatalf("jwks after adding k2: %v", ids)
	}
	if err := ring.SetKeys([]seal.Key{ringKey("k1", 1, false), ringKey("k2", 2, true)}); err != nil {
		t.Fatal(err)
	}
	next, _ := w.tokens()
	if kid := kidOf(t, next); kid != "k2" {
		t.Fatalf("kid after promoting k2: %q", kid)
	}
	w.wantAccepted(old, memoryURL)
	w.wantAccepted(next, memoryURL)
	if ids := w.jwksIDs(); !slices.Equal(ids, []string{"k1", "k2"}) {
		t.Fatalf("jwks after promoting k2: %v", ids)
	}
	// Retire k1: its tokens stop.
	if err := ring.SetKeys([]seal.Key{ringKey("k2", 2, true)}); err != nil {
		t.Fatal(err)
	}
	w.wantRefused(old, memoryURL, `unknown key id "k1"`)
	w.wantAccepted(next, memoryURL)
	if ids := w.jwksIDs(); !slices.Equal(ids, []string{"k2"}) {
		t.Fatalf("jwks after retiring k1: %v", ids)
	}
}

// TestRestartKeepsTokens: a new Server on the same store (a restart)
// verifies the tokens of the old one and redeems its refresh tokens:
// with ring keys configured (the same keys: the same signing keys), or
// with none (the store's seed).
func TestRestartKeepsTokens(t *testing.T) {
	for _, tc := range []struct {
		name string
		ring func() *seal.Ring
		kid  string
	}{
		{"ring keys", func() *seal.Ring {
			r, err := seal.New([]seal.Key{ringKey("k1", 1, true)})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}, "k1"},
		{"seed", seal.NewRandom, seedKeyID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := newWorld(t, tc.ring(), nil, nil)
			access, refresh := before.tokens()
			if kid := kidOf(t, access); kid != tc.kid {
				t.Fatalf("kid %q, want %q", kid, tc.kid)
			}
			after := newWorld(t, tc.ring(), before.store, before.clk)
			after.wantAccepted(access, memoryURL)
			status, body := after.refresh(refresh, nil)
			if status != http.StatusOK {
				t.Fatalf("refresh after the restart: %d %v", status, body)
			}
			after.wantAccepted(body["access_token"].(string), memoryURL)
			before.wantAccepted(body["access_token"].(string), memoryURL) // the old one's keys are the same
		})
	}
	// Another store, another seed: the tokens do not verify.
	a := newWorld(t, nil, nil, nil)
	access, _ := a.tokens()
	b := newWorld(t, nil, nil, nil)
	b.wantRefused(access, memoryURL, "signature")
}
