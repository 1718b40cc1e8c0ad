package eras

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file is where a parked request lives, for a gateway of several
// replicas: a request answered input_required waits on the connection of
// the replica that served it (a translation process is owner-bound), and
// its retry may land on any replica. Every replica opens the requestState
// (the key ring is the cluster's); the one that does not hold the request
// learns from the state's place where it is, and the front sends the retry
// there (Elsewhere).
//
// The place is a fixed block, so that a state's length does not depend on
// its replica (sealedRetry tells the gateway's states from a server's by
// their length): one length byte, the place, zeros up to MaxPlace. A
// Parking without a Place seals states without the block, as before
// there were replicas; both shapes open everywhere.

// MaxPlace bounds Parking.Place.
const MaxPlace = 127

// placeBlockLen is the place block's length in a requestState.
const placeBlockLen = 1 + MaxPlace

// parkedShape reports whether n is the length of a parked request's
// state: a handle and a digest, with a place block or not.
func parkedShape(n int) bool {
	base := handleLen + sha256.Size
	return n == base || n == base+placeBlockLen
}

// appendPlace appends p's place block to plain, if p has a place that
// fits.
func (p *Parking[S]) appendPlace(plain []byte) []byte {
	if len(p.Place) == 0 || len(p.Place) > MaxPlace {
		return plain
	}
	plain = append(plain, byte(len(p.Place)))
	plain = append(plain, p.Place...)
	return append(plain, make([]byte, MaxPlace-len(p.Place))...)
}

// Elsewhere returns the place of the replica that holds the request retry
// msg names, when that is not this one: its requestState opens, names a
// place other than p.Place, and its request is not parked here. nil
// otherwise (not a retry, a state of no place or of this one, one that
// does not open: Unpark answers those as ever).
func (p *Parking[S]) Elsewhere(msg *jsonrpc.Message) []byte {
	if len(p.Place) == 0 || !isRetry(msg) {
		return nil
	}
	state, _, err := retryParams(msg)
	if err != nil {
		return nil
	}
	plain, err := p.Ring.Open(parkedPurpose, state)
	if err != nil || len(plain) != handleLen+sha256.Size+placeBlockLen {
		return nil
	}
	block := plain[handleLen+sha256.Size:]
	n := int(block[0])
	if n == 0 || n > MaxPlace {
		return nil
	}
	place := block[1 : 1+n]
	if bytes.Equal(place, p.Place) {
		return nil
	}
	p.init()
	p.mu.Lock()
	_, here := p.reqs[hex.EncodeToString(plain[:handleLen])]
	p.mu.Unlock()
	if here {
		return nil
	}
	return bytes.Clone(place)
}
