package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.json")
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %q, %v", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Parse(data, nil) // no environment: examples need none
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			if len(cfg.Servers) == 0 {
				t.Errorf("no servers")
			}
		})
	}
}

// TestFullExampleShowsDefaults checks that examples/full.json names every
// gateway key at its default, and that its first server shows every stdio
// key at its default: the file is the reference users copy from.
func TestFullExampleShowsDefaults(t *testing.T) {
	data, err := os.ReadFile("../../examples/full.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.Gateway, Defaults()) {
		t.Errorf("full.json gateway = %+v, want defaults %+v", cfg.Gateway, Defaults())
	}
	g := Defaults()
	want := g.NewServer("memory")
	want.Command, want.Args = "npx", []string{"-y", "@modelcontextprotocol/server-memory"}
	want.Env, want.Roots, want.InheritEnv = map[string]string{}, []Root{}, []string{}
	none := Globs{Allow: []string{}, Deny: []string{}}
	want.Tools, want.Prompts, want.Resources = none, none, none
	if got := cfg.Servers["memory"]; !reflect.DeepEqual(got, want) {
		t.Errorf("full.json memory = %+v, want %+v", got, want)
	}
	text := string(data)
	for _, key := range fieldKeys(reflect.TypeFor[Gateway]()) {
		if key == "secrets" { // read from secretsFile
			continue
		}
		if !strings.Contains(text, `"`+key+`":`) {
			t.Errorf("full.json lacks gateway key %q", key)
		}
	}
	for _, key := range fieldKeys(reflect.TypeFor[Server]()) {
		switch key {
		case "name": // the entry's key
		case "url", "headers", "principalHeaders": // remote servers are rejected until supported
		case "secrets": // gateway.secretsFile's, linked by Parse
		default:
			if !strings.Contains(text, `"`+key+`":`) {
				t.Errorf("full.json lacks server key %q", key)
			}
		}
	}
	// The endpoint "all" as the default would be, every key written.
	wantAll := NewEndpoint(DefaultEndpoint, []string{"filesystem", "memory"})
	wantAll.Tools, wantAll.Prompts, wantAll.Resources = none, none, none
	if got := cfg.Endpoints[DefaultEndpoint]; !reflect.DeepEqual(got, wantAll) || len(cfg.Endpoints) != 1 {
		t.Errorf("full.json endpoints = %v, all = %+v, want %+v", cfg.EndpointNames(), got, wantAll)
	}
	for _, key := range fieldKeys(reflect.TypeFor[Endpoint]()) {
		switch key {
		case "name", "implicit":
		default:
			if !strings.Contains(text, `"`+key+`":`) {
				t.Errorf("full.json lacks endpoint key %q", key)
			}
		}
	}
}

// fieldKeys returns the JSON key of each field of a config struct.
func fieldKeys(t reflect.Type) []string {
	special := map[string]string{"URL": "url", "TLS": "tls", "SSEReplayEvents": "sseReplayEvents", "SSEReplayBytes": "sseReplayBytes"}
	var keys []string
	for f := range t.Fields() {
		key, ok := special[f.Name]
		if !ok {
			key = strings.ToLower(f.Name[:1]) + f.Name[1:]
		}
		keys = append(keys, key)
	}
	return keys
}
