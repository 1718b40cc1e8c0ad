package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// key returns a key of id whose secret is b repeated.
func key(id string, b byte, primary bool) Key {
	return Key{ID: id, Secret: bytes.Repeat([]byte{b}, KeySize), Primary: primary}
}

func TestNewRefusesBadKeySets(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []Key
		want string
	}{
		{"none", nil, "no primary key"},
		{"no primary", []Key{key("a", 1, false), key("b", 2, false)}, "no primary key"},
		{"two primaries", []Key{key("a", 1, true), key("b", 2, true)}, `keys "a" and "b" are both primary`},
		{"duplicate id", []Key{key("a", 1, true), key("a", 2, false)}, `key id "a" is listed twice`},
		{"short key", []Key{{ID: "a", Secret: make([]byte, 16), Primary: true}}, `key "a" is 16 bytes, want 32`},
		{"empty id", []Key{key("", 1, true)}, "key 0: a key id is 1 to 64 characters"},
		{"long id", []Key{key(strings.Repeat("k", MaxIDLen+1), 1, true)}, "1 to 64 characters"},
		{"id with a space", []Key{key("a b", 1, true)}, `key id "a b": use only`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.keys)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, %v; want an error with %q", r, err, tc.want)
			}
		})
	}
}

func TestSetKeysRefusedKeepsTheKeys(t *testing.T) {
	r, err := New([]Key{key("a", 1, true)})
	if err != nil {
		t.Fatal(err)
	}
	tok := r.Seal("p", []byte("v"), hour)
	if err := r.SetKeys([]Key{key("b", 2, false)}); err == nil {
		t.Fatal("SetKeys without a primary: no error")
	}
	if got, err := r.Open("p", tok); err != nil || string(got) != "v" {
		t.Fatalf("after a refused SetKeys: %q, %v; want the value (keys kept)", got, err)
	}
	if r.Primary() != "a" {
		t.Fatalf("primary %q after a refused SetKeys, want a", r.Primary())
	}
}

func TestRandomRing(t *testing.T) {
	r := NewRandom()
	if !r.Random() || !strings.HasPrefix(r.Primary(), "random-") {
		t.Fatalf("NewRandom: random %v, primary %q", r.Random(), r.Primary())
	}
	tok := r.Seal("p", []byte("v"), hour)
	r.SetRandom() // already random: the same key, values keep opening
	if _, err := r.Open("p", tok); err != nil {
		t.Fatalf("after SetRandom on a random ring: %v", err)
	}
	if _, err := NewRandom().Open("p", tok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("another random ring opening it: %v, want ErrUnknownKey", err)
	}
	if err := r.SetKeys([]Key{key("a", 1, true)}); err != nil || r.Random() {
		t.Fatalf("SetKeys: %v, random %v", err, r.Random())
	}
	r.SetRandom() // configured keys dropped: a fresh random key
	if !r.Random() || r.Primary() == "a" {
		t.Fatalf("SetRandom after configured keys: random %v, primary %q", r.Random(), r.Primary())
	}
}
