package eras

import (
	"encoding/json"
	"testing"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

func TestDiscover(t *testing.T) {
	legacy := []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
	tests := []struct {
		name   string
		init   string
		legacy []string
		drop   []string
		want   string
	}{
		{"everything server",
			`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"prompts":{},"logging":{},"resources":{"subscribe":true}},"serverInfo":{"name":"s","version":"1.0.0"},"instructions":"Use <b> & </b>."}`,
			legacy, []string{"logging", "absent"},
			`{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"capabilities":{"prompts":{},"resources":{"subscribe":true},"tools":{"listChanged":true}},"instructions":"Use <b> & </b>.","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1.0.0"}}}`},
		{"no serverInfo, no instructions, repeated versions",
			`{ "capabilities" : { } , "instructions" : null }`,
			[]string{"2025-11-25", protocol.StatelessVersion, "2025-11-25"}, nil,
			`{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{},"ttlMs":0,"cacheScope":"private"}`},
		{"values kept as written, compacted",
			`{"capabilities":{"experimental":{"x":{"n":1.50e+2,"s":"\u00e9\/"}}},"serverInfo":{"name":"é", "version":"2","title":"T"}}`,
			nil, nil,
			`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"experimental":{"x":{"n":1.50e+2,"s":"\u00e9\/"}}},"ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"é","version":"2","title":"T"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Discover([]byte(tt.init), tt.legacy, tt.drop)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Fatal("invalid JSON")
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `{"capabilities":[]}`, `{"capabilities":null}`, `{"serverInfo":{}}`, `{"capabilities":{}`} {
		if got, err := Discover([]byte(in), nil, nil); err == nil {
			t.Errorf("Discover(%s) = %s, want an error", in, got)
		}
	}
}
