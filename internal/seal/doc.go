// Package seal owns the gateway's key ring: every value the gateway hands
// a client to give back later (a parked request's requestState, a
// passthrough server's requestState bound to its principal) is sealed and
// opened here, with one set of keys, so that a value sealed by one replica
// opens on another that holds the same keys, and keys rotate without
// cutting off the values in flight.
//
// A sealed value is AES-256-GCM over an absolute expiry and the caller's
// plaintext, with the id of the key that sealed it in clear in front
// (token.go). The caller's purpose is bound as authenticated data, so a
// value sealed for one use cannot be opened as another. Several keys open;
// exactly one, the primary, seals. Rotation is three reloads: add the new
// key (every replica can open what it will seal), promote it to primary
// (the old key still opens what it sealed), retire the old key once its
// values have expired.
//
// Callers: internal/gateway builds the Ring from the config
// (gateway.sealKeys or gateway.sealKeyFile) and swaps its keys on reload
// (SetKeys); internal/front seals and opens with it. Without configured
// keys the gateway makes a ring with one random key (NewRandom), whose
// values do not survive a restart and do not open on another replica.
//
// Locking: a Ring's key set is immutable and held behind an atomic
// pointer; SetKeys replaces it whole. Seal and Open take no lock and are
// safe for concurrent use with each other and with SetKeys.
package seal
