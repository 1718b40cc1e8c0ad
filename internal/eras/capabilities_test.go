package eras

import (
	"encoding/json"
	"testing"
)

func TestParseCapSet(t *testing.T) {
	for _, tt := range []struct {
		caps string
		want CapSet
		name string
	}{
		{`{}`, 0, "none"},
		{`not json`, 0, "none"},
		{`{"sampling":{},"roots":{"listChanged":true}}`, CapSampling | CapRoots, "sampling,roots"},
		{`{"sampling":null,"elicitation":{}}`, CapElicitation, "elicitation"},
		{`{"elicitation":{"form":{},"url":{}}}`, CapElicitation, "elicitation"},
		{`{"elicitation":{"url":{}}}`, 0, "none"}, // url mode only: not declared
		{`{"elicitation":true}`, CapElicitation, "elicitation"},
	} {
		s := ParseCapSet([]byte(tt.caps))
		if s != tt.want || s.String() != tt.name {
			t.Errorf("ParseCapSet(%s) = %v (%s), want %v (%s)", tt.caps, uint8(s), s, uint8(tt.want), tt.name)
		}
	}
	if got := string((CapSampling | CapElicitation | CapRoots).Declared()); got != `{"sampling":{},"elicitation":{"form":{}},"roots":{}}` {
		t.Errorf("Declared = %s", got)
	}
}

// FuzzParseCapSet: any input parses to some set; what a set declares is a
// JSON object that parses back to the same set.
func FuzzParseCapSet(f *testing.F) {
	f.Add([]byte(`{"sampling":{},"elicitation":{"url":{}},"roots":{}}`))
	f.Add([]byte(`{"elicitation":[1]}`))
	f.Fuzz(func(t *testing.T, caps []byte) {
		s := ParseCapSet(caps)
		d := s.Declared()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(d, &m); err != nil {
			t.Fatalf("Declared %s: %v", d, err)
		}
		if back := ParseCapSet(d); back != s {
			t.Fatalf("ParseCapSet(Declared(%v)) = %v", uint8(s), uint8(back))
		}
	})
}
