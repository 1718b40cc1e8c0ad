package protocol

import "slices"

// The protocol versions the gateway knows (specification revisions, named
// by their date).
const (
	// Version20241105 is the first revision: initialize, and the HTTP+SSE
	// transport (a GET stream plus a POST endpoint it announces).
	Version20241105 = "2024-11-05"
	// Version20250326 brought Streamable HTTP and is the only version with
	// JSON-RPC batches.
	Version20250326 = "2025-03-26"
	// Version20250618 is a session-era revision.
	Version20250618 = "2025-06-18"
	// Version20251125 is the last session-era revision; its SSE streams
	// open with a priming event.
	Version20251125 = "2025-11-25"
	// Version20260728 is the stateless revision.
	Version20260728 = "2026-07-28"
)

// LatestSessionVersion is the newest session-era version: the one the
// gateway asks an upstream for in its own initialize.
const LatestSessionVersion = Version20251125

// StatelessVersion is the first version without sessions (2026-07-28).
const StatelessVersion = Version20260728

// SessionVersions are the session-era versions the gateway negotiates with
// clients and upstreams, newest first (the order of a -32022's "supported").
var SessionVersions = []string{Version20251125, Version20250618, Version20250326, Version20241105}

// StatelessVersions are the stateless versions the gateway serves. A
// stateless request with a version not listed is refused with
// [CodeUnsupportedVersion].
var StatelessVersions = []string{StatelessVersion}

// IsSessionVersion reports whether v is a session-era version the gateway
// speaks.
func IsSessionVersion(v string) bool { return slices.Contains(SessionVersions, v) }

// IsStatelessVersion reports whether v is a stateless version the gateway
// serves.
func IsStatelessVersion(v string) bool { return slices.Contains(StatelessVersions, v) }

// IsStateless reports whether a negotiated version v has no sessions: v is
// the stateless revision or a later one. Versions are dates, so they
// compare as strings.
func IsStateless(v string) bool { return v >= StatelessVersion }

// AllowsBatches reports whether version v lets a client POST a JSON-RPC
// batch: only 2025-03-26 did.
func AllowsBatches(v string) bool { return v == Version20250326 }

// PrimesStreams reports whether an SSE stream of a session at version v
// opens with a priming event (an id and no data), so a client can resume it
// even before the first message: from 2025-11-25 on, stateless versions
// excluded (nothing of theirs can be resumed).
func PrimesStreams(v string) bool { return v >= Version20251125 && !IsStateless(v) }
