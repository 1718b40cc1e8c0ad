package seal

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"time"
)

// A sealed value (a token) is base64url, unpadded, of
//
//	version (1 byte) | id length (1 byte) | key id | nonce (12 bytes) |
//	AES-256-GCM( expiry (8 bytes, Unix nanoseconds, big endian) | plaintext ) | tag (16 bytes)
//
// with the authenticated data the header (version, id length, key id)
// followed by the purpose. The key id is in clear so that Open picks the
// key without trying each; binding it (and the version) means a value
// cannot be moved to another key or format. The expiry is absolute, so
// every replica agrees on it, and sealed, so only a key holder sets it.
// Nonces are random: at 96 bits, a key seals 2^32 values before the
// chance of a repeat reaches 2^-32 (NIST SP 800-38D, 8.3), far beyond a
// key's life between rotations.

// tokenVersion is the first byte of every token: a later format can tell
// its own tokens from these.
const tokenVersion = 1

const (
	nonceSize  = 12 // GCM's standard nonce
	tagSize    = 16 // GCM's tag
	expirySize = 8
)

// enc writes tokens; strict reads them, refusing any other spelling of
// the same bytes (nonzero padding bits).
var (
	enc    = base64.RawURLEncoding
	strict = base64.RawURLEncoding.Strict()
)

// Seal returns plaintext sealed with the primary key for purpose, valid
// for ttl from now.
func (r *Ring) Seal(purpose string, plaintext []byte, ttl time.Duration) string {
	k := r.set.Load().primary
	head := 2 + len(k.id)
	n := head + nonceSize + expirySize + len(plaintext) + tagSize
	buf := make([]byte, n)
	buf[0], buf[1] = tokenVersion, byte(len(k.id))
	copy(buf[2:], k.id)
	nonce := buf[head : head+nonceSize]
	_, _ = rand.Read(nonce) // never fails (crypto/rand)
	// Sealed in place: the ciphertext and tag take the message's room.
	msg := buf[head+nonceSize : n-tagSize]
	binary.BigEndian.PutUint64(msg, uint64(r.now().Add(ttl).UnixNano()))
	copy(msg[expirySize:], plaintext)
	ad := make([]byte, 0, head+len(purpose))
	ad = append(append(ad, buf[:head]...), purpose...)
	k.aead.Seal(msg[:0], nonce, msg, ad)
	return enc.EncodeToString(buf)
}

// Open returns the plaintext sealed in token for purpose: ErrInvalid if
// token is not one of the ring's format, was altered or sealed for
// another purpose; ErrUnknownKey if its key is not in the ring;
// ErrExpired if it is past its expiry.
func (r *Ring) Open(purpose, token string) ([]byte, error) {
	raw, err := strict.DecodeString(token)
	if err != nil {
		return nil, ErrInvalid
	}
	id, body, ok := split(raw)
	if !ok {
		return nil, ErrInvalid
	}
	k := r.set.Load().byID[id]
	if k == nil {
		return nil, ErrUnknownKey
	}
	head := len(raw) - len(body)
	ad := make([]byte, 0, head+len(purpose))
	ad = append(append(ad, raw[:head]...), purpose...)
	plain, err := k.aead.Open(body[nonceSize:nonceSize], body[:nonceSize], body[nonceSize:], ad)
	if err != nil {
		return nil, ErrInvalid
	}
	expires := int64(binary.BigEndian.Uint64(plain))
	if r.now().UnixNano() > expires {
		return nil, ErrExpired
	}
	return plain[expirySize:], nil
}

// Shaped reports whether token has the shape of a value of n plaintext
// bytes sealed by a ring: its header names a key (known to this ring or
// not: retired, say) and leaves n bytes for the plaintext, or its length
// is that of such a value sealed by one of the ring's keys. Nothing else
// is checked. It is for a caller that must tell its own tokens from
// another party's opaque values before it decides who checks one: a token
// of the ring altered in place, or sealed by a key since retired, stays
// its own (and Open refuses it), while another party's value is its own
// only in the unlikely case that it decodes to such a shape.
func (r *Ring) Shaped(token string, n int) bool {
	raw, err := strict.DecodeString(token)
	if err != nil {
		return false
	}
	if _, body, ok := split(raw); ok && len(body) == nonceSize+expirySize+n+tagSize {
		return true
	}
	for id := range r.set.Load().byID {
		if len(raw) == 2+len(id)+nonceSize+expirySize+n+tagSize {
			return true
		}
	}
	return false
}

// split cuts a decoded token into its key id and the rest (nonce,
// ciphertext and tag), if it has the ring's format and room for them.
func split(raw []byte) (id string, body []byte, ok bool) {
	if len(raw) < 2 || raw[0] != tokenVersion {
		return "", nil, false
	}
	n := int(raw[1])
	if n == 0 || n > MaxIDLen || len(raw) < 2+n+nonceSize+expirySize+tagSize {
		return "", nil, false
	}
	return string(raw[2 : 2+n]), raw[2+n:], true
}
