package seal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
	"time"
)

const hour = time.Hour

// clock is a settable time for a ring's expiries.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestSealOpens(t *testing.T) {
	r, err := New([]Key{key("k1", 1, true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, plain := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("state"), 1000)} {
		tok := r.Seal("purpose", plain, hour)
		got, err := r.Open("purpose", tok)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Open(Seal(%d bytes)): %d bytes, %v", len(plain), len(got), err)
		}
		if !r.Shaped(tok, len(plain)) || r.Shaped(tok, len(plain)+1) || len(plain) > 0 && r.Shaped(tok, len(plain)-1) {
			t.Fatalf("Shaped: not true for %d bytes only", len(plain))
		}
	}
	if a, b := r.Seal("p", []byte("same"), hour), r.Seal("p", []byte("same"), hour); a == b {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}
}

func TestOpenBindsPurpose(t *testing.T) {
	r, _ := New([]Key{key("k1", 1, true)})
	tok := r.Seal("mrtr", []byte("v"), hour)
	for _, other := range []string{"", "mrtr\x00", "passstate", "mrt"} {
		if _, err := r.Open(other, tok); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open for purpose %q of a value sealed for \"mrtr\": %v, want ErrInvalid", other, err)
		}
	}
}

func TestOpenExpires(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	r, _ := New([]Key{key("k1", 1, true)})
	r.now = c.now
	tok := r.Seal("p", []byte("v"), time.Minute)
	c.t = c.t.Add(time.Minute) // at its expiry: still good
	if _, err := r.Open("p", tok); err != nil {
		t.Fatalf("at its expiry: %v", err)
	}
	c.t = c.t.Add(time.Nanosecond)
	if _, err := r.Open("p", tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("past its expiry: %v, want ErrExpired", err)
	}
}

// A token altered in place, or sealed by a key the ring no longer holds,
// keeps its shape: its holder refuses it rather than take it for another
// party's value.
func TestShaped(t *testing.T) {
	r, _ := New([]Key{key("k1", 1, true), key("k22", 2, false)})
	tok := r.Seal("p", make([]byte, 48), hour)
	alt := "AAAAAAAA" + tok[8:]
	if !r.Shaped(alt, 48) {
		t.Error("a token altered in place lost its shape")
	}
	other, _ := New([]Key{key("retired", 3, true)})
	if byOther := other.Seal("p", make([]byte, 48), hour); !r.Shaped(byOther, 48) || r.Shaped(byOther, 47) {
		t.Error("a token of a key the ring does not hold is not Shaped for its length only")
	}
	for _, bad := range []string{"", "srv:x1", tok + "AAAA", tok[:len(tok)-1], tok[:len(tok)-4]} {
		if r.Shaped(bad, 48) {
			t.Errorf("Shaped(%q)", bad)
		}
	}
}

func TestOpenRefusesAlteredTokens(t *testing.T) {
	r, _ := New([]Key{key("k1", 1, true)})
	tok := r.Seal("p", []byte("value"), hour)
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	for i := range raw {
		alt := bytes.Clone(raw)
		alt[i] ^= 0x01
		_, err := r.Open("p", base64.RawURLEncoding.EncodeToString(alt))
		switch {
		case 1 <= i && i < 2+len("k1"): // the id's length or bytes: another id
			if !errors.Is(err, ErrUnknownKey) {
				t.Errorf("byte %d altered (key id): %v, want ErrUnknownKey", i, err)
			}
		case !errors.Is(err, ErrInvalid):
			t.Errorf("byte %d altered: %v, want ErrInvalid", i, err)
		}
	}
	for _, bad := range []string{"", "!!", tok[:len(tok)-1], tok + "A", tok + "="} {
		if _, err := r.Open("p", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

// Rotation is add -> promote -> retire: each step keeps the values in
// flight opening until their key is gone.
func TestRotation(t *testing.T) {
	r, _ := New([]Key{key("old", 1, true)})
	byOld := r.Seal("p", []byte("1"), hour)

	if err := r.SetKeys([]Key{key("old", 1, true), key("new", 2, false)}); err != nil { // add
		t.Fatal(err)
	}
	if r.Primary() != "old" {
		t.Fatalf("after add: primary %q, want old (the new key only opens)", r.Primary())
	}
	if err := r.SetKeys([]Key{key("old", 1, false), key("new", 2, true)}); err != nil { // promote
		t.Fatal(err)
	}
	byNew := r.Seal("p", []byte("2"), hour)
	for _, tok := range []string{byOld, byNew} {
		if _, err := r.Open("p", tok); err != nil {
			t.Fatalf("after promote: %v", err)
		}
	}
	if err := r.SetKeys([]Key{key("new", 2, true)}); err != nil { // retire
		t.Fatal(err)
	}
	if _, err := r.Open("p", byOld); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("sealed by the retired key: %v, want ErrUnknownKey", err)
	}
	if got, err := r.Open("p", byNew); err != nil || string(got) != "2" {
		t.Fatalf("sealed by the primary after retire: %q, %v", got, err)
	}

	// A key listed again under its id with another secret does not open
	// what the first one sealed.
	if err := r.SetKeys([]Key{key("new", 3, true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open("p", byNew); !errors.Is(err, ErrInvalid) {
		t.Fatalf("same id, another secret: %v, want ErrInvalid", err)
	}
}

func FuzzOpen(f *testing.F) {
	r, _ := New([]Key{key("k1", 1, true), key("k2", 2, false)})
	f.Add("p", r.Seal("p", []byte("v"), hour))
	f.Add("p", r.Seal("p", nil, hour))
	f.Add("", "AQJrMQ")
	f.Add("q", "")
	f.Fuzz(func(t *testing.T, purpose, tok string) {
		plain, err := r.Open(purpose, tok)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrExpired) {
				t.Fatalf("Open: error %v is none of the sentinels", err)
			}
			return
		}
		// Only a value the ring sealed opens: it has the ring's shape.
		if !r.Shaped(tok, len(plain)) {
			t.Fatalf("opened %d bytes from a token not Shaped for them", len(plain))
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	r, _ := New([]Key{key("k1", 1, true)})
	plain := bytes.Repeat([]byte("x"), 48) // a parked request's state
	b.ReportAllocs()
	for b.Loop() {
		r.Seal("purpose", plain, hour)
	}
}

func BenchmarkOpen(b *testing.B) {
	r, _ := New([]Key{key("k1", 1, true)})
	tok := r.Seal("purpose", bytes.Repeat([]byte("x"), 48), hour)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Open("purpose", tok); err != nil {
			b.Fatal(err)
		}
	}
}
