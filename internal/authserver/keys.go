package authserver

import (
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcpgate/mcpgate/internal/seal"
)

// The signing keys of access tokens: Ed25519 keys derived from the
// gateway's key ring (seal.Ring.Derive), so that every replica holding
// the same ring signs and checks alike and a rotation of the ring (add,
// promote, retire) rotates them; or, when the ring is random (no seal
// keys configured: a personal gateway), one key derived from the
// Store's seed, kept across restarts, whose key id is "seed".

// signingInfo is the HKDF info of the signing keys: a key derived for
// another use of the same ring secret is another key.
const signingInfo = "mcpgate authserver signing v1"

// seedKeyID is the key id of the key derived from the Store's seed.
const seedKeyID = "seed"

// signingKey is one key pair, its id the ring key's it derives from.
type signingKey struct {
	id      string
	private ed25519.PrivateKey
	public  ed25519.PublicKey
}

// keyRing gives the signing keys of the moment. mu guards cache, which
// keeps the key pairs already made (by derived seed) so that the gate,
// asking for the public keys on every token, does not remake them; it
// holds at most the ring's keys of the last few reloads.
type keyRing struct {
	ring *seal.Ring
	seed []byte // the Store's, read once at start

	mu    sync.Mutex
	cache map[string]*signingKey // by id + derived seed
}

func newKeyRing(ctx context.Context, ring *seal.Ring, store Store) (*keyRing, error) {
	k := &keyRing{ring: ring, cache: map[string]*signingKey{}}
	if !ring.Random() {
		// The ring's keys sign: the Store (perhaps Redis, perhaps down
		// now) has nothing to give.
		return k, nil
	}
	seed, err := store.Seed(ctx)
	if err != nil {
		return nil, fmt.Errorf("authserver: the store's seed: %w", err)
	}
	k.seed = seed
	return k, nil
}

// keys returns the key that signs now and every key that verifies
// (sorted by id).
func (k *keyRing) keys() (primary *signingKey, all []*signingKey) {
	var (
		seeds map[string][]byte
		pid   string
	)
	if k.ring.Random() {
		// A random ring's secret dies with the process: the tokens would
		// too. The Store's seed is kept.
		b, err := hkdf.Key(sha256.New, k.seed, nil, signingInfo, ed25519.SeedSize)
		if err != nil {
			panic(err) // 32 bytes of HKDF-SHA256 never fail
		}
		seeds, pid = map[string][]byte{seedKeyID: b}, seedKeyID
	} else {
		seeds, pid = k.ring.Derive(signingInfo, ed25519.SeedSize)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.cache) > 4*len(seeds)+8 {
		clear(k.cache) // keys of old reloads
	}
	for id, s := range seeds {
		ck := id + "\x00" + string(s)
		sk := k.cache[ck]
		if sk == nil {
			priv := ed25519.NewKeyFromSeed(s)
			sk = &signingKey{id: id, private: priv, public: priv.Public().(ed25519.PublicKey)}
			k.cache[ck] = sk
		}
		all = append(all, sk)
		if id == pid {
			primary = sk
		}
	}
	slices.SortFunc(all, func(a, b *signingKey) int { return strings.Compare(a.id, b.id) })
	return primary, all
}

// jwks is the JSON Web Key Set of the verifying keys (RFC 7517).
func (k *keyRing) jwks() jose.JSONWebKeySet {
	_, all := k.keys()
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(all))}
	for _, sk := range all {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: sk.public, KeyID: sk.id, Algorithm: string(jose.EdDSA), Use: "sig"})
	}
	return set
}
