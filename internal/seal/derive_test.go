package seal

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"testing"
)

func TestDerive(t *testing.T) {
	r, err := New([]Key{key("old", 1, false), key("new", 2, true)})
	if err != nil {
		t.Fatal(err)
	}
	keys, primary := r.Derive("use one", 32)
	if primary != "new" || len(keys) != 2 {
		t.Fatalf("Derive: %d keys, primary %q; want 2 and new", len(keys), primary)
	}
	// What RFC 5869 gives for the secret: the derivation is HKDF-SHA256,
	// which another implementation (a replica of another version) can
	// repeat.
	want, err := hkdf.Key(sha256.New, bytes.Repeat([]byte{2}, KeySize), nil, "use one", 32)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(keys["new"], want) {
		t.Fatalf("key new derived %x, want %x", keys["new"], want)
	}
	for id, b := range keys {
		if bytes.Equal(b, bytes.Repeat([]byte{1}, KeySize)) || bytes.Equal(b, bytes.Repeat([]byte{2}, KeySize)) {
			t.Fatalf("key %s: Derive returned a secret", id)
		}
	}
	if bytes.Equal(keys["old"], keys["new"]) {
		t.Fatal("two keys derived the same bytes")
	}
	other, _ := r.Derive("use two", 32)
	if bytes.Equal(other["new"], keys["new"]) {
		t.Fatal("two uses derived the same bytes from one key")
	}
	// Same keys, another ring (another replica): the same bytes.
	r2, err := New([]Key{key("new", 2, true)})
	if err != nil {
		t.Fatal(err)
	}
	again, primary := r2.Derive("use one", 32)
	if primary != "new" || !bytes.Equal(again["new"], keys["new"]) {
		t.Fatalf("another ring with the same key derived %x (primary %q), want %x", again["new"], primary, keys["new"])
	}
	// A rotation: promote old, and the primary derived follows.
	if err := r.SetKeys([]Key{key("old", 1, true), key("new", 2, false)}); err != nil {
		t.Fatal(err)
	}
	if _, primary := r.Derive("use one", 32); primary != "old" {
		t.Fatalf("after promoting old, primary %q", primary)
	}
}

func TestDeriveRandomRing(t *testing.T) {
	r := NewRandom()
	keys, primary := r.Derive("x", 32)
	if len(keys[primary]) != 32 {
		t.Fatalf("random ring: %d keys, primary %q of %d bytes", len(keys), primary, len(keys[primary]))
	}
}
