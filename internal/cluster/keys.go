package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// keys names the Redis keys and channels. A key that a script or a
// transaction touches together with others shares their hash tag (the part
// in braces), so that a Redis Cluster puts them on one slot: the keys of a
// session carry a hash of its id, the keys of a principal's limits a hash
// of the principal. Ids, principals and tool names reach Redis only
// hashed: they may hold braces, and a principal key is nobody's business.
type keys struct {
	prefix string
}

// tag is the hash tag of s: 128 bits of its SHA-256, in hex.
func tag(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

// instance holds a replica's advertised address while its heartbeats last.
func (k keys) instance(id string) string { return k.prefix + "instance:{" + tag(id) + "}" }

// instances is the sorted set of replica ids, scored by when each one's
// last heartbeat expires (Unix milliseconds).
func (k keys) instances() string { return k.prefix + "instances" }

// state is the hash of a session's handoff state: its version (n, tie)
// and the state.
func (k keys) state(sid string) string   { return k.prefix + "s:{" + tag(sid) + "}:handoff" }
func (k keys) revoked(sid string) string { return k.prefix + "s:{" + tag(sid) + "}:revoked" }

// revokeChannel carries the ids of revoked sessions; stateChannel the
// handoff states stored (stateChange).
func (k keys) revokeChannel() string { return k.prefix + "revoke" }
func (k keys) stateChannel() string  { return k.prefix + "state" }

// rate is the GCRA bucket name of principal (name: see limits.Rate).
func (k keys) rate(principal, name string) string {
	return k.prefix + "l:{" + tag(principal) + "}:r:" + tag(name)
}

func (k keys) inFlight(principal string) string {
	return k.prefix + "l:{" + tag(principal) + "}:inflight:h" // a hash: one count per replica
}
func (k keys) sessions(principal string) string {
	return k.prefix + "l:{" + tag(principal) + "}:sessions"
}

// streamMeta is the hash of a session's resumable stream (streams.go);
// streamEvents its events.
func (k keys) streamMeta(sid string, stream uint64) string {
	return k.prefix + "s:{" + tag(sid) + "}:sm:" + strconv.FormatUint(stream, 10)
}
func (k keys) streamEvents(sid string, stream uint64) string {
	return k.prefix + "s:{" + tag(sid) + "}:se:" + strconv.FormatUint(stream, 10)
}
