package seal

import (
	"crypto/hkdf"
	"crypto/sha256"
)

// Derive returns n bytes derived from each key of the ring for the use
// info names (HKDF-SHA256, RFC 5869, the key's secret as input keying
// material, no salt), by key id, and the id of the primary key. Another
// use of a ring key (the authorization server's token signing key, say)
// gets a key of its own this way: its secret never leaves the ring, and
// a value of one use can never be taken for the other's. Replicas
// holding the same keys derive the same bytes, and a rotation of the
// ring (add, promote, retire) rotates what is derived with it.
func (r *Ring) Derive(info string, n int) (keys map[string][]byte, primary string) {
	set := r.set.Load()
	keys = make(map[string][]byte, len(set.byID))
	for id, k := range set.byID {
		b, err := hkdf.Key(sha256.New, k.secret, nil, info, n)
		if err != nil {
			// Only a length past 255*32 bytes fails: a caller's bug.
			panic("seal: Derive: " + err.Error())
		}
		keys[id] = b
	}
	return keys, set.primary.id
}
