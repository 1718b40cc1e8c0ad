package eras

import (
	"errors"
	"testing"
)

func TestDecodeHeaderValue(t *testing.T) {
	tests := []struct {
		in, want string
		err      bool
	}{
		// The spec's examples (streamable-http.mdx).
		{"=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界", false},
		{"=?base64?IHBhZGRlZCA=?=", " padded ", false},
		{"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?=", false},
		// Plain values.
		{"get_weather", "get_weather", false},
		{"file:///a b", "file:///a b", false},
		{"", "", false},
		{"=?base64?", "=?base64?", false},             // no end marker
		{"=?base64?=", "=?base64?=", false},           // markers overlap: not a sentinel
		{"=?BASE64?SGk=?=", "=?BASE64?SGk=?=", false}, // markers are case-sensitive
		{"x=?base64?SGk=?=", "x=?base64?SGk=?=", false},
		{"=?base64?SGk=?= ", "=?base64?SGk=?= ", false},
		// Sentinels.
		{"=?base64??=", "", false},
		{"=?base64?SGk=?=", "Hi", false},
		{"=?base64?literal?=", "", true}, // not base64
		{"=?base64?SGk?=", "", true},     // padding is required
		{"=?base64?SGl=?=", "", true},    // non-zero padding bits
		{"=?base64?S Gk=?=", "", true},
		{"=?base64?/w==?=", "", true}, // 0xff is not UTF-8
	}
	for _, tt := range tests {
		got, err := DecodeHeaderValue(tt.in)
		if tt.err {
			if err == nil || !errors.Is(err, ErrHeaderEncoding) {
				t.Errorf("DecodeHeaderValue(%q) = %q, %v; want an ErrHeaderEncoding", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestEncodeHeaderValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{" padded ", "=?base64?IHBhZGRlZCA=?="},
		{"=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{"=?base64?=", "=?base64?PT9iYXNlNjQ/PQ==?="},
		{"get_weather", "get_weather"},
		{"a b\tc", "a b\tc"},
		{"", ""},
		{"\ttab", "=?base64?CXRhYg==?="},
		{"line\nbreak", "=?base64?bGluZQpicmVhaw==?="},
		{"del\x7f", "=?base64?ZGVsfw==?="},
	}
	for _, tt := range tests {
		if got := EncodeHeaderValue(tt.in); got != tt.want {
			t.Errorf("EncodeHeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := DecodeHeaderValue(tt.want); err != nil || back != tt.in {
			t.Errorf("DecodeHeaderValue(%q) = %q, %v; want %q", tt.want, back, err, tt.in)
		}
	}
}
