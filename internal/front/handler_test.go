package front

import (
	"strings"
	"testing"
)

func TestAccepts(t *testing.T) {
	tests := []struct {
		header, want string
		ok           bool
	}{
		{"application/json, text/event-stream", "application/json", true},
		{"application/json, text/event-stream", "text/event-stream", true},
		{"text/event-stream;q=0.9,application/json;q=1", "application/json", true},
		{"*/*", "text/event-stream", true},
		{"text/*", "text/event-stream", true},
		{"application/*", "text/event-stream", false},
		{"application/json", "text/event-stream", false},
		{"", "application/json", false},
		{"application/jsonx", "application/json", false},
		{"garbage;;;, application/json", "application/json", true},
	}
	for _, tt := range tests {
		if got := accepts(tt.header, tt.want); got != tt.ok {
			t.Errorf("accepts(%q, %q) = %v, want %v", tt.header, tt.want, got, tt.ok)
		}
	}
}

// FuzzAccepts: the Accept parser never panics, and a header that lists the
// wanted type verbatim is always accepted whatever else it holds.
func FuzzAccepts(f *testing.F) {
	f.Add("application/json, text/event-stream")
	f.Add("*/*;q=0.1")
	f.Add(`text/event-stream; charset="x`)
	f.Fuzz(func(t *testing.T, header string) {
		_ = accepts(header, "application/json")
		if !strings.ContainsAny(header, "\x00") && !accepts(header+", text/event-stream", "text/event-stream") {
			t.Fatalf("%q plus the wanted type was refused", header)
		}
	})
}
