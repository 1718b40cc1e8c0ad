package front

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"

	"github.com/mcpgate/mcpgate/internal/seal"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file is the front's side of running as one of several replicas
// (docs/deployment.md, "Running more than one replica"). With
// Config.Cluster set, a session's id is sealed: it says which target it
// is for, whose it is, when it was made and which replica holds it (its
// owner), so that any replica can tell, from the id alone, where a
// request for a session it does not hold belongs (elsewhere.go). The
// local directory is asked first: a session this replica holds costs no
// cryptography.
//
// A session id is "<random>.<sealed claim>": 128 random bits, then the
// claim sealed by the key ring with the target and the random part as
// authenticated data. The random part comes first so that ids differ in
// their first characters, which logs and the admin API show.

// Cluster is what the front needs of the replicas (internal/cluster's
// Cluster, wired by internal/gateway). Its methods are safe for
// concurrent use, and none blocks longer than its store's timeout.
type Cluster interface {
	// Instance names this replica's process life; Advertise is the
	// host:port the other replicas reach it at.
	Instance() string
	Advertise() string
	// Alive reports whether instance beat its heart lately; known is
	// false when nobody can tell (no store, or the store is down).
	Alive(instance string) (alive, known bool)
	// SetState stores the handoff record of portable session sid, of
	// version v, to live until expiry, unless the store holds one as new
	// or newer (then stored is false, and nothing changes); a record
	// stored is announced to every replica's Handler.StateChanged.
	// State returns the newest record and its version (nil and no error:
	// none).
	SetState(ctx context.Context, sid string, v session.StateVersion, record []byte, expiry time.Time) (stored bool, err error)
	State(ctx context.Context, sid string) ([]byte, session.StateVersion, error)
	// Revoke ends session sid on every replica (a client's DELETE), and
	// tells each replica's Handler.Revoked; Revoked reports whether it was.
	Revoke(ctx context.Context, sid string, expiry time.Time) error
	Revoked(ctx context.Context, sid string) (bool, error)
	// OpenStream records stream of portable session sid as resumable on
	// every replica (sharedstreams.go): this replica writes it, for the
	// requests whose raw ids are given; AppendEvent records one of its
	// events, and makes the record live for ttl. Both only queue the
	// write, never blocking: false when it was dropped.
	OpenStream(sid string, stream uint64, requests [][]byte, ttl time.Duration) bool
	AppendEvent(sid string, stream uint64, ev session.Event, ttl time.Duration) bool
	// Events returns what the store has of stream of session sid, with
	// the events after seq since; nil and no error: nothing.
	Events(ctx context.Context, sid string, stream, since uint64) (*session.Record, error)
}

// claimVersion is the first byte of every claim's plaintext.
const claimVersion = 1

// claim flags.
const flagLegacy = 1 << 0

// claim is what a sealed session id says.
type claim struct {
	legacy    bool      // a 2024-11-05 HTTP+SSE session
	created   time.Time // to the second
	principal [8]byte   // principalHash of the owner key
	instance  string    // the replica that opened it
	advertise string    // where that replica is reached
}

// errClaim is any claim that does not parse.
var errClaim = errors.New("mcpgate: not a session claim")

// maxClaimString bounds the claim's strings (an instance id, an address).
const maxClaimString = 255

func (c *claim) marshal() []byte {
	b := make([]byte, 0, 2+8+8+2+len(c.instance)+len(c.advertise))
	flags := byte(0)
	if c.legacy {
		flags |= flagLegacy
	}
	b = append(b, claimVersion, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(c.created.Unix()))
	b = append(b, c.principal[:]...)
	return appendPlace(b, c.instance, c.advertise)
}

// parseClaim reads a claim's plaintext; any other bytes are errClaim.
func parseClaim(b []byte) (claim, error) {
	var c claim
	if len(b) < 2+8+8+2 || b[0] != claimVersion || b[1]&^flagLegacy != 0 {
		return c, errClaim
	}
	c.legacy = b[1]&flagLegacy != 0
	c.created = time.Unix(int64(binary.BigEndian.Uint64(b[2:10])), 0)
	copy(c.principal[:], b[10:18])
	var ok bool
	if c.instance, c.advertise, ok = parsePlace(b[18:]); !ok {
		return c, errClaim
	}
	return c, nil
}

// A place is a replica as the values it seals name one (a session's
// owner, the replica a request is parked on or that relayed a server's
// request): its instance, then the address the other replicas reach it
// at, each length-prefixed.

// placeOf is this replica's place.
func placeOf(cl Cluster) []byte {
	return appendPlace(make([]byte, 0, 2+len(cl.Instance())+len(cl.Advertise())), cl.Instance(), cl.Advertise())
}

// appendPlace appends the place of instance at advertise to b.
func appendPlace(b []byte, instance, advertise string) []byte {
	b = append(b, byte(len(instance)))
	b = append(b, instance...)
	b = append(b, byte(len(advertise)))
	return append(b, advertise...)
}

// parsePlace reads a place, which must fill b.
func parsePlace(b []byte) (instance, advertise string, ok bool) {
	if instance, b, ok = cutString(b); !ok {
		return "", "", false
	}
	if advertise, b, ok = cutString(b); !ok || len(b) != 0 || instance == "" || advertise == "" {
		return "", "", false
	}
	return instance, advertise, true
}

// cutString reads one length-prefixed string.
func cutString(b []byte) (string, []byte, bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return "", nil, false
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:], true
}

// principalHash is an owner key (ownerKey) as a claim carries it: enough
// to tell principals apart, not to name one.
func principalHash(owner string) (h [8]byte) {
	sum := sha256.Sum256([]byte(owner))
	copy(h[:], sum[:])
	return h
}

// sessionPurpose is the purpose a session id's claim is sealed for: its
// target and random part, so that a claim moved to another target or
// glued to another random part does not open.
func sessionPurpose(target, random string) string {
	return "mcpgate session\x00" + target + "\x00" + random
}

// randomPartLen is the length of a session id's random part: 16 bytes,
// base64url unpadded.
const randomPartLen = 22

// mintID returns a sealed session id for a session of target opened by
// owner at now.
func mintID(ring *seal.Ring, cl Cluster, target, owner string, legacy bool, now time.Time, maxAge time.Duration) (string, error) {
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	random := base64.RawURLEncoding.EncodeToString(r[:])
	c := claim{legacy: legacy, created: now, principal: principalHash(owner), instance: cl.Instance(), advertise: cl.Advertise()}
	if len(c.instance) > maxClaimString || len(c.advertise) > maxClaimString {
		return "", errors.New("mcpgate: the cluster's instance or advertise address is over 255 bytes")
	}
	return random + "." + ring.Seal(sessionPurpose(target, random), c.marshal(), maxAge), nil
}

// openID returns the claim of a session id of target, if it is one this
// cluster's keys sealed and it has not expired.
func openID(ring *seal.Ring, target, id string) (claim, error) {
	if len(id) <= randomPartLen || id[randomPartLen] != '.' {
		return claim{}, errClaim
	}
	random, token := id[:randomPartLen], id[randomPartLen+1:]
	plain, err := ring.Open(sessionPurpose(target, random), token)
	if err != nil {
		return claim{}, err
	}
	return parseClaim(plain)
}

// A portable session's handoff record, as the cluster's store keeps it:
// the negotiated protocol version (length-prefixed), then the connection's
// handoff state (conn.Handoff) as its backend encoded it.

func handoffRecord(version string, state []byte) []byte {
	b := make([]byte, 0, 1+len(version)+len(state))
	b = append(b, byte(len(version)))
	b = append(b, version...)
	return append(b, state...)
}

// parseHandoffRecord reads a handoff record; false for one that does not
// parse (no version).
func parseHandoffRecord(b []byte) (version string, state []byte, ok bool) {
	version, state, ok = cutString(b)
	return version, state, ok && version != ""
}

// create makes a session of target for owner in the directory: under a
// sealed id with the cluster on, a random one without.
func (h *Handler) create(target, owner string, legacy bool, now time.Time) (*session.Session, error) {
	if h.cfg.Cluster == nil {
		return h.store.Create(target, owner, now)
	}
	id, err := mintID(h.cfg.Seal, h.cfg.Cluster, target, owner, legacy, now, h.cfg.SessionMaxAge)
	if err != nil {
		return nil, err
	}
	s, err := h.store.Adopt(id, target, owner, now)
	if err == nil {
		h.numberStreams(s) // sharedstreams.go
	}
	return s, err
}
