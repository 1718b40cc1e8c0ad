package servers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// TestHandoffRoundTrip: every kind of state decodes to what was encoded,
// and the upstream session's renewing initialize is built from it.
func TestHandoffRoundTrip(t *testing.T) {
	for _, h := range []handoffState{
		{kind: kindUpstream},
		{kind: kindReverse},
		{kind: kindUpstream, session: "abc-123", version: "2025-06-18"},
		{kind: kindUpstream, version: "2025-03-26"}, // a remote without sessions
		{kind: kindUpstream, session: "s", version: "2025-11-25", caps: json.RawMessage(`{"roots":{}}`), info: json.RawMessage(`{"name":"n","version":"1"}`)},
		{kind: kindReverse, version: "2024-11-05", caps: json.RawMessage(`{}`)},
		{kind: kindReverse, version: "2025-06-18", level: json.RawMessage(`"debug"`)},
		{kind: kindReverse, version: "2025-06-18", subs: []string{"", "file:///a", "mem://b"}},
		{kind: kindReverse, version: "2025-11-25", caps: json.RawMessage(`{"roots":{}}`), info: json.RawMessage(`{"name":"n"}`),
			level: json.RawMessage(`"warning"`), subs: []string{"file:///a"}},
	} {
		b := h.encode()
		got, err := decodeHandoff(b)
		if err != nil {
			t.Errorf("%+v: %v", h, err)
			continue
		}
		if !reflect.DeepEqual(got, h) {
			t.Errorf("decoded %+v, want %+v", got, h)
		}
	}
	h := upstreamState(remote.Session{ID: "s", Version: "2025-06-18",
		Init: []byte(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"n","version":"2"}}`)})
	rs := h.remoteSession()
	if rs.ID != "s" || rs.Version != "2025-06-18" ||
		string(rs.Init) != `{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"n","version":"2"}}` {
		t.Errorf("the resumed session: %+v, init %s", rs, rs.Init)
	}
	if rs := (handoffState{kind: kindUpstream, session: "s", version: "2025-06-18"}).remoteSession(); rs.Init != nil {
		t.Errorf("a state without capabilities renews with %s", rs.Init)
	}
}

// TestHandoffLeavesOutWhatDoesNotFit: capabilities that are not an object,
// or too long for a state, are left out rather than making a state the
// decoder refuses.
func TestHandoffLeavesOutWhatDoesNotFit(t *testing.T) {
	huge := json.RawMessage(`{"experimental":{"x":"` + strings.Repeat("a", maxHandoffBytes) + `"}}`)
	for _, caps := range []json.RawMessage{huge, json.RawMessage(`[1]`), json.RawMessage(`{"a":`)} {
		b := handoffState{kind: kindReverse, version: "2025-06-18", caps: caps, info: json.RawMessage(`{"name":"n"}`)}.encode()
		got, err := decodeHandoff(b)
		if err != nil || got.caps != nil || got.info != nil || got.version != "2025-06-18" {
			t.Errorf("caps of %d bytes: %+v, %v", len(caps), got, err)
		}
		if len(b) > maxHandoffBytes {
			t.Errorf("a state of %d bytes", len(b))
		}
	}
}

// TestHandoffLayouts: a state with neither a level nor subscriptions is
// written in layout 1, byte for byte as before layout 2 (a replica of the
// version before reads it); one with either in layout 2.
func TestHandoffLayouts(t *testing.T) {
	v1 := []byte{handoffV1, kindReverse, 0, 10}
	v1 = append(v1, "2025-06-18"...)
	v1 = append(v1, 2, '{', '}', 0)
	if got := (handoffState{kind: kindReverse, version: "2025-06-18", caps: json.RawMessage(`{}`)}).encode(); !bytes.Equal(got, v1) {
		t.Errorf("encoded %q, want layout 1's %q", got, v1)
	}
	if h, err := decodeHandoff(v1); err != nil || h.level != nil || h.subs != nil || string(h.caps) != `{}` {
		t.Errorf("layout 1 decoded to %+v, %v", h, err)
	}
	v2 := append(bytes.Clone(v1), 7)
	v2 = append(v2, `"debug"`...)
	v2 = append(v2, 4, 3, 'a', ':', 'b')
	v2[0] = handoffV2
	h := handoffState{kind: kindReverse, version: "2025-06-18", caps: json.RawMessage(`{}`), level: json.RawMessage(`"debug"`), subs: []string{"a:b"}}
	if got := h.encode(); !bytes.Equal(got, v2) {
		t.Errorf("encoded %q, want %q", got, v2)
	}
	// What is not a level, or not a set, is left out.
	for _, bad := range []handoffState{
		{kind: kindReverse, version: "2025-06-18", level: json.RawMessage(`3`)},
		{kind: kindReverse, version: "2025-06-18", level: json.RawMessage(`"` + strings.Repeat("x", maxLevelBytes) + `"`)},
		{kind: kindReverse, version: "2025-06-18", subs: []string{"b", "a"}},
		{kind: kindReverse, version: "2025-06-18", subs: []string{"a", "a"}},
		{kind: kindReverse, version: "2025-06-18", subs: []string{}},
	} {
		if b := bad.encode(); b[0] != handoffV1 {
			t.Errorf("%+v encoded in layout %d", bad, b[0])
		}
	}
}

// TestHandoffLeavesOutSubscriptionsFirst: subscriptions that would make
// the state too long are left out, the level, capabilities and
// clientInfo kept; only what still does not fit goes next.
func TestHandoffLeavesOutSubscriptionsFirst(t *testing.T) {
	var subs []string
	for i := range 200 {
		subs = append(subs, fmt.Sprintf("file:///%03d/%s", i, strings.Repeat("u", 40)))
	}
	h := handoffState{kind: kindReverse, version: "2025-06-18", caps: json.RawMessage(`{"sampling":{}}`), info: json.RawMessage(`{"name":"n"}`),
		level: json.RawMessage(`"debug"`), subs: subs}
	b := h.encode()
	got, err := decodeHandoff(b)
	if err != nil || got.subs != nil || string(got.level) != `"debug"` || string(got.caps) != `{"sampling":{}}` || string(got.info) != `{"name":"n"}` {
		t.Errorf("%d URIs: decoded %+v, %v", len(subs), got, err)
	}
	if len(b) > maxHandoffBytes {
		t.Errorf("a state of %d bytes", len(b))
	}
	h.subs = subs[:10]
	if got, err := decodeHandoff(h.encode()); err != nil || !slices.Equal(got.subs, subs[:10]) {
		t.Errorf("10 URIs: decoded %+v, %v", got, err)
	}
}

// TestHandoffRefused: what decodeHandoff refuses, each with errBadState.
func TestHandoffRefused(t *testing.T) {
	ok := handoffState{kind: kindUpstream, session: "s", version: "2025-06-18"}.encode()
	field := func(kind byte, fields ...string) []byte {
		b := []byte{handoffV1, kind}
		for _, f := range fields {
			b = append(b, byte(len(f)))
			b = append(b, f...)
		}
		return b
	}
	v2 := func(kind byte, fields ...string) []byte {
		b := field(kind, fields...)
		b[0] = handoffV2
		return b
	}
	for name, b := range map[string][]byte{
		"nil":                  nil,
		"one byte":             {handoffV1},
		"layout 0":             append([]byte{0}, ok[1:]...),
		"unknown kind":         field('x', "s", "2025-06-18", "", ""),
		"three fields":         field(kindUpstream, "s", "2025-06-18", ""),
		"trailing byte":        append(bytes.Clone(ok), 0),
		"length past the end":  append(bytes.Clone(ok[:len(ok)-1]), 5),
		"huge length":          {handoffV1, kindUpstream, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"space in session":     field(kindUpstream, "a b", "2025-06-18", "", ""),
		"NUL in version":       field(kindUpstream, "s", "2025\x00", "", ""),
		"long version":         field(kindUpstream, "s", strings.Repeat("9", maxVersionBytes+1), "", ""),
		"reverse with session": field(kindReverse, "s", "2025-06-18", "", ""),
		"reverse, 2026":        field(kindReverse, "", "2026-07-28", "", ""),
		"session, no version":  field(kindUpstream, "s", "", "", ""),
		"caps, no version":     field(kindUpstream, "", "", "{}", ""),
		"caps an array":        field(kindUpstream, "s", "2025-06-18", "[]", ""),
		"clientInfo cut":       field(kindUpstream, "s", "2025-06-18", "{}", `{"name":`),
		"too long":             append(field(kindUpstream, "s", "2025-06-18", "", ""), make([]byte, maxHandoffBytes)...),
		"layout 3":             append([]byte{3}, ok[1:]...),
		"layout 2, 4 fields":   append([]byte{handoffV2}, ok[1:]...),
		"layout 2, empty":      v2(kindReverse, "", "2025-06-18", "", "", "", ""),
		"level on upstream":    v2(kindUpstream, "s", "2025-06-18", "", "", `"debug"`, ""),
		"subs on upstream":     v2(kindUpstream, "s", "2025-06-18", "", "", "", "\x01a"),
		"level, no version":    v2(kindReverse, "", "", "", "", `"debug"`, ""),
		"level a number":       v2(kindReverse, "", "2025-06-18", "", "", "3", ""),
		"level unquoted":       v2(kindReverse, "", "2025-06-18", "", "", `"debug`, ""),
		"level too long":       v2(kindReverse, "", "2025-06-18", "", "", `"`+strings.Repeat("x", maxLevelBytes)+`"`, ""),
		"URIs out of order":    v2(kindReverse, "", "2025-06-18", "", "", "", "\x01b\x01a"),
		"URI repeated":         v2(kindReverse, "", "2025-06-18", "", "", "", "\x01a\x01a"),
		"URI cut short":        v2(kindReverse, "", "2025-06-18", "", "", "", "\x05a"),
	} {
		if h, err := decodeHandoff(b); !errors.Is(err, errBadState) {
			t.Errorf("%s: decoded %+v, %v", name, h, err)
		}
	}
}

// FuzzDecodeHandoff: any bytes decode or are refused without a panic; what
// decodes encodes to a state that decodes to the same, whose fields are
// safe in headers and JSON.
func FuzzDecodeHandoff(f *testing.F) {
	f.Add(handoffState{kind: kindUpstream}.encode())
	f.Add(handoffState{kind: kindUpstream, session: "abc", version: "2025-06-18", caps: json.RawMessage(`{}`), info: json.RawMessage(`{"name":"n"}`)}.encode())
	f.Add(handoffState{kind: kindReverse, version: "2025-11-25", caps: json.RawMessage(`{"sampling":{}}`)}.encode())
	f.Add([]byte{handoffV1, kindUpstream, 0x80, 0x00, 0, 0, 0})
	f.Add(handoffState{kind: kindReverse, version: "2025-06-18", level: json.RawMessage(`"debug"`)}.encode())
	f.Add(handoffState{kind: kindReverse, version: "2025-11-25", caps: json.RawMessage(`{}`), info: json.RawMessage(`{"name":"n"}`),
		level: json.RawMessage(`"info"`), subs: []string{"", "file:///a", "mem://b"}}.encode())
	f.Add([]byte{handoffV2, kindReverse, 1, '1', 0, 0, 0, 0, 4, 1, 'b', 1, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandoff(b)
		if err != nil {
			if !errors.Is(err, errBadState) {
				t.Fatalf("an error without errBadState: %v", err)
			}
			return
		}
		again, err := decodeHandoff(h.encode())
		if err != nil || !reflect.DeepEqual(again, h) {
			t.Fatalf("%q decoded to %+v, re-encoded to %+v, %v", b, h, again, err)
		}
		if !headerSafe(h.session) || !headerSafe(h.version) || !jsonObject(h.caps) || !jsonObject(h.info) || !levelValid(h.level) || !increasing(h.subs) {
			t.Fatalf("accepted %+v", h)
		}
		if h.kind != kindReverse && (h.level != nil || h.subs != nil) {
			t.Fatalf("an upstream session with a level or subscriptions: %+v", h)
		}
		if rs := h.remoteSession(); rs.Init != nil && !json.Valid(rs.Init) {
			t.Fatalf("renewing initialize %s", rs.Init)
		}
	})
}
