package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// KeySize is the length of every key, in bytes: AES-256.
const KeySize = 32

// MaxIDLen bounds a key id, in bytes: the id travels in clear in every
// sealed value, so it is kept short.
const MaxIDLen = 64

// Sentinel errors of Open. A caller that answers a client should not tell
// them apart in what the client sees: each means "not a value of ours that
// is still good", and which one is a hint for an attacker, not for the
// client.
var (
	// ErrInvalid: not a sealed value, altered, or sealed for another
	// purpose.
	ErrInvalid = errors.New("seal: invalid sealed value")
	// ErrUnknownKey: sealed by a key the ring does not hold (retired, or
	// another deployment's).
	ErrUnknownKey = errors.New("seal: sealed by an unknown key")
	// ErrExpired: authentic, but past its expiry.
	ErrExpired = errors.New("seal: sealed value expired")
)

// Key is one key of a ring.
type Key struct {
	// ID names the key in every value it seals: 1 to MaxIDLen bytes of
	// letters, digits, '.', '_' and '-'.
	ID string
	// Secret is the AES-256 key, KeySize bytes.
	Secret []byte
	// Primary marks the one key that seals.
	Primary bool
}

// CheckID reports whether id can name a key.
func CheckID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("a key id is 1 to %d characters", MaxIDLen)
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("key id %q: use only letters, digits, '.', '_' and '-'", id)
		}
	}
	return nil
}

// Ring seals with its primary key and opens with any of its keys. The
// zero Ring is not usable: make one with New or NewRandom.
type Ring struct {
	set atomic.Pointer[keySet]
	// now is the clock expiries are set and checked by; time.Now but in
	// tests.
	now func() time.Time
}

// keySet is one immutable generation of a ring's keys.
type keySet struct {
	primary *ringKey
	byID    map[string]*ringKey
	random  bool // made by NewRandom
}

type ringKey struct {
	id   string
	aead cipher.AEAD
	// secret is kept only for Derive, which hands out keys derived from
	// it, never the secret itself.
	secret []byte
}

// New returns a ring of keys, which must hold exactly one primary and no
// id twice.
func New(keys []Key) (*Ring, error) {
	set, err := newKeySet(keys)
	if err != nil {
		return nil, err
	}
	r := &Ring{now: time.Now}
	r.set.Store(set)
	return r, nil
}

// NewRandom returns a ring of one random key: what the gateway seals with
// when no key is configured. Its values open only in this process.
func NewRandom() *Ring {
	r := &Ring{now: time.Now}
	r.set.Store(randomSet())
	return r
}

// randomSet is a set of one fresh random key.
func randomSet() *keySet {
	secret := make([]byte, KeySize)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	var id [4]byte
	_, _ = rand.Read(id[:])
	set, err := newKeySet([]Key{{ID: "random-" + hex.EncodeToString(id[:]), Secret: secret, Primary: true}})
	if err != nil {
		panic(err) // a fresh key of KeySize bytes is always valid
	}
	set.random = true
	return set
}

// SetKeys replaces the ring's keys (a reload): values sealed by a key
// still listed keep opening, those sealed by a key gone no longer do. On
// error the ring keeps its keys.
func (r *Ring) SetKeys(keys []Key) error {
	set, err := newKeySet(keys)
	if err != nil {
		return err
	}
	r.set.Store(set)
	return nil
}

// SetRandom gives the ring one fresh random key, unless its keys are
// random already: a reload that configures no key keeps the values sealed
// since the start opening, and one that drops the configured keys gets
// the same key a start without them would.
func (r *Ring) SetRandom() {
	if !r.Random() {
		r.set.Store(randomSet())
	}
}

// Random reports whether the ring's one key is random (NewRandom,
// SetRandom): its values do not survive a restart.
func (r *Ring) Random() bool { return r.set.Load().random }

// Primary returns the id of the key that seals.
func (r *Ring) Primary() string { return r.set.Load().primary.id }

// newKeySet checks keys and makes their ciphers.
func newKeySet(keys []Key) (*keySet, error) {
	set := &keySet{byID: make(map[string]*ringKey, len(keys))}
	for i, k := range keys {
		if err := CheckID(k.ID); err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i, err)
		}
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("seal: key %q is %d bytes, want %d", k.ID, len(k.Secret), KeySize)
		}
		if set.byID[k.ID] != nil {
			return nil, fmt.Errorf("seal: key id %q is listed twice", k.ID)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("seal: key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("seal: key %q: %w", k.ID, err)
		}
		rk := &ringKey{id: k.ID, aead: aead, secret: bytes.Clone(k.Secret)}
		set.byID[k.ID] = rk
		if k.Primary {
			if set.primary != nil {
				return nil, fmt.Errorf("seal: keys %q and %q are both primary; exactly one seals", set.primary.id, k.ID)
			}
			set.primary = rk
		}
	}
	if set.primary == nil {
		return nil, errors.New("seal: no primary key; exactly one seals")
	}
	return set, nil
}
