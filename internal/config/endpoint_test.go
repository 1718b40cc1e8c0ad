package config

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseEndpoints(t *testing.T) {
	file := `{"mcpServers": {
	    "memory": {"command": "x", "critical": true},
	    "everything": {"command": "x", "prefix": "ev", "tools": {"deny": ["long*"]}},
	    "thinking": {"command": "x", "prefix": ""}
	  },
	  "gateway": {"endpoints": {
	    "research": {
	      "servers": ["thinking", "memory"],
	      "tools": {"allow": ["memory__*", "sequentialthinking"], "deny": ["*delete*"]},
	      "prompts": {"deny": ["*"]},
	      "resources": {"allow": ["memory://*"]},
	      "separator": "_",
	      "maxNameLength": 40,
	      "snakeCase": true
	    },
	    "memory": {"servers": ["memory"]}
	  }}}`
	cfg, err := Parse([]byte(file), nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := cfg.EndpointNames(), []string{"all", "memory", "research"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("EndpointNames() = %q, want %q", got, want)
	}
	research := &Endpoint{
		Name:          "research",
		Servers:       []string{"thinking", "memory"},
		Tools:         Globs{Allow: []string{"memory__*", "sequentialthinking"}, Deny: []string{"*delete*"}},
		Prompts:       Globs{Deny: []string{"*"}},
		Resources:     Globs{Allow: []string{"memory://*"}},
		Separator:     "_",
		MaxNameLength: 40,
		SnakeCase:     true,
		MaxListBytes:  DefaultMaxListBytes,
	}
	if got := cfg.Endpoints["research"]; !reflect.DeepEqual(got, research) {
		t.Errorf("research =\n %+v\nwant\n %+v", got, research)
	}
	// An endpoint may share a server's name; unset keys take their defaults.
	if got, want := cfg.Endpoints["memory"], NewEndpoint("memory", []string{"memory"}); !reflect.DeepEqual(got, want) {
		t.Errorf("memory = %+v, want %+v", got, want)
	}
	// The default endpoint: every server, sorted, default settings.
	all := cfg.Endpoints["all"]
	if all == nil || !reflect.DeepEqual(all.Servers, []string{"everything", "memory", "thinking"}) ||
		all.Separator != "__" || all.MaxNameLength != 64 || all.SnakeCase || all.Name != "all" {
		t.Errorf("all = %+v", all)
	}
	// The servers' own keys.
	if s := cfg.Servers["memory"]; s.Prefix != "memory" || !s.Critical {
		t.Errorf("memory prefix %q critical %v, want the name and true", s.Prefix, s.Critical)
	}
	if s := cfg.Servers["everything"]; s.Prefix != "ev" || !reflect.DeepEqual(s.Tools, Globs{Deny: []string{"long*"}}) {
		t.Errorf("everything prefix %q tools %+v", s.Prefix, s.Tools)
	}
	if s := cfg.Servers["thinking"]; s.Prefix != "" {
		t.Errorf("thinking prefix %q, want none", s.Prefix)
	}
}

func TestParseDefaultEndpoint(t *testing.T) {
	servers := `"mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}`
	tests := []struct {
		name      string
		endpoints string // the gateway.endpoints value, "" for none
		want      map[string][]string
	}{
		{"implicit", ``, map[string][]string{"all": {"a", "b"}}},
		{"null", `null`, map[string][]string{"all": {"a", "b"}}},
		{"all null", `{"all": null}`, map[string][]string{"all": {"a", "b"}}},
		{"beside others", `{"e": {"servers": ["b"]}}`, map[string][]string{"all": {"a", "b"}, "e": {"b"}}},
		{"off", `{"all": false}`, map[string][]string{}},
		{"off beside others", `{"all": false, "e": {"servers": ["a"]}}`, map[string][]string{"e": {"a"}}},
		{"own servers", `{"all": {"servers": ["b"]}}`, map[string][]string{"all": {"b"}}},
		{"settings only", `{"all": {"separator": "-"}}`, map[string][]string{"all": {"a", "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := `{` + servers + `}`
			if tt.endpoints != "" {
				file = `{` + servers + `, "gateway": {"endpoints": ` + tt.endpoints + `}}`
			}
			cfg, err := Parse([]byte(file), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := map[string][]string{}
			for name, e := range cfg.Endpoints {
				got[name] = e.Servers
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("endpoints = %v, want %v", got, tt.want)
			}
		})
	}
}

// A Config built in code has only the endpoints it sets, and Validate
// checks them as Parse does.
func TestValidateBuiltEndpoints(t *testing.T) {
	cfg := Default()
	if len(cfg.Endpoints) != 0 || cfg.Endpoints == nil {
		t.Fatalf("Default() endpoints = %v, want an empty map", cfg.Endpoints)
	}
	a := cfg.Gateway.NewServer("a")
	a.Command = "x"
	cfg.Servers["a"] = a
	cfg.Endpoints["e"] = NewEndpoint("e", []string{"a"})
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	cfg.Endpoints["f"] = &Endpoint{Name: "g", Servers: []string{"a", "b"}} // defaults left at zero
	cfg.Endpoints["h"] = nil
	var ps Problems
	if err := cfg.Validate(); !errors.As(err, &ps) {
		t.Fatalf("Validate = %v", err)
	}
	want := Problems{
		{"gateway.endpoints.f", `endpoint Name "g" differs from its key`},
		{"gateway.endpoints.f.maxListBytes", "must be at least 1048576, not 0"},
		{"gateway.endpoints.f.maxNameLength", "must be from 16 to 128, not 0"},
		{"gateway.endpoints.f.separator", `must not be empty (the default is "__")`},
		{"gateway.endpoints.f.servers[1]", `unknown server "b" (not in mcpServers)`},
		{"gateway.endpoints.h", "missing"},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("problems:\n %v\nwant\n %v", ps, want)
	}
}

// TestParseEndpointLists: "pageSize" and "maxListBytes" of an endpoint,
// the default endpoint's included, are read; a negative page size and a
// bound under 1 MiB are problems naming their key.
func TestParseEndpointLists(t *testing.T) {
	file := `{"mcpServers": {"a": {"command": "x"}},
	  "gateway": {"endpoints": {"all": {"pageSize": 50, "maxListBytes": 2097152}}}}`
	cfg, err := Parse([]byte(file), nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if all := cfg.Endpoints[DefaultEndpoint]; all.PageSize != 50 || all.MaxListBytes != 2<<20 {
		t.Errorf("all: pageSize %d, maxListBytes %d, want 50 and 2097152", all.PageSize, all.MaxListBytes)
	}
	_, err = Parse([]byte(`{"mcpServers": {"a": {"command": "x"}},
	  "gateway": {"endpoints": {"e": {"servers": ["a"], "pageSize": -1, "maxListBytes": 1000}}}}`), nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Parse = %v, want problems", err)
	}
	want := Problems{
		{"gateway.endpoints.e.maxListBytes", "must be at least 1048576, not 1000"},
		{"gateway.endpoints.e.pageSize", "must be 0 (never page) or more, not -1"},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("problems:\n %v\nwant\n %v", ps, want)
	}
}
