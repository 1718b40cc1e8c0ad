package protocol

import (
	"slices"
	"testing"
)

func TestVersionPredicates(t *testing.T) {
	tests := []struct {
		v                                   string
		session, statelessServed, stateless bool
		batches, primes                     bool
	}{
		{v: "2024-11-05", session: true},
		{v: "2025-03-26", session: true, batches: true},
		{v: "2025-06-18", session: true},
		{v: "2025-11-25", session: true, primes: true},
		{v: "2026-07-28", statelessServed: true, stateless: true},
		// A later revision has no sessions either, though the gateway does
		// not serve it (it is refused with -32022).
		{v: "2027-01-01", stateless: true},
		{v: "2024-10-07"},
		{v: ""},
		// Versions are dates compared as strings: one between the last
		// session-era revision and the stateless one would prime streams.
		{v: "2026-01-01", primes: true},
	}
	for _, tt := range tests {
		if got := IsSessionVersion(tt.v); got != tt.session {
			t.Errorf("IsSessionVersion(%q) = %v, want %v", tt.v, got, tt.session)
		}
		if got := IsStatelessVersion(tt.v); got != tt.statelessServed {
			t.Errorf("IsStatelessVersion(%q) = %v, want %v", tt.v, got, tt.statelessServed)
		}
		if got := IsStateless(tt.v); got != tt.stateless {
			t.Errorf("IsStateless(%q) = %v, want %v", tt.v, got, tt.stateless)
		}
		if got := AllowsBatches(tt.v); got != tt.batches {
			t.Errorf("AllowsBatches(%q) = %v, want %v", tt.v, got, tt.batches)
		}
		if got := PrimesStreams(tt.v); got != tt.primes {
			t.Errorf("PrimesStreams(%q) = %v, want %v", tt.v, got, tt.primes)
		}
	}
}

// TestVersionLists: the session versions are newest first (the order a
// -32022's "supported" lists them in), the newest is the one the gateway
// asks upstreams for, and no version is in both eras.
func TestVersionLists(t *testing.T) {
	want := []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
	if !slices.Equal(SessionVersions, want) {
		t.Errorf("SessionVersions = %q, want %q", SessionVersions, want)
	}
	if LatestSessionVersion != SessionVersions[0] {
		t.Errorf("LatestSessionVersion = %q, want the newest session version %q", LatestSessionVersion, SessionVersions[0])
	}
	if !slices.Equal(StatelessVersions, []string{"2026-07-28"}) || StatelessVersion != "2026-07-28" {
		t.Errorf("StatelessVersions = %q, StatelessVersion = %q, want 2026-07-28", StatelessVersions, StatelessVersion)
	}
	for _, v := range SessionVersions {
		if IsStateless(v) || IsStatelessVersion(v) {
			t.Errorf("session version %q counts as stateless", v)
		}
	}
	for _, v := range StatelessVersions {
		if !IsStateless(v) || IsSessionVersion(v) {
			t.Errorf("stateless version %q counts as a session version", v)
		}
	}
}
