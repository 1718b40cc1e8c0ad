package mux

import "testing"

func TestNegotiate(t *testing.T) {
	tests := []struct{ requested, upstream, want string }{
		{"2025-11-25", "2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-11-25", "2025-06-18"},
		{"2025-03-26", "2025-11-25", "2025-03-26"},
		{"2024-11-05", "2025-11-25", "2024-11-05"},
		{"2025-11-25", "2025-06-18", "2025-06-18"}, // never newer than the upstream agreed
		{"2099-01-01", "2025-11-25", "2025-11-25"}, // unknown: offer the newest
		{"", "2025-03-26", "2025-03-26"},
		{"2025-06-18", "", "2025-06-18"},
		{"2025-06-18", "1999-01-01", "2025-06-18"}, // an upstream version we do not speak counts as the latest
	}
	for _, tt := range tests {
		if got := Negotiate(tt.requested, tt.upstream); got != tt.want {
			t.Errorf("Negotiate(%q, %q) = %q, want %q", tt.requested, tt.upstream, got, tt.want)
		}
	}
}

func TestParseUintOnlyOwnIDs(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "7": 7, "18446744073709551615": 0} {
		got, ok := parseUint([]byte(in))
		if in == "18446744073709551615" {
			if ok {
				t.Errorf("%s: accepted a 20-digit id", in)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("%s: got %d %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", `"1"`, "-1", "1.0", "1e3", "12345678901234567890"} {
		if _, ok := parseUint([]byte(bad)); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestLevelRank(t *testing.T) {
	if !(levelRank("debug") < levelRank("info") && levelRank("error") < levelRank("emergency")) {
		t.Fatal("levels out of order")
	}
	if validLevel("verbose") || !validLevel("warning") {
		t.Fatal("validLevel")
	}
}
