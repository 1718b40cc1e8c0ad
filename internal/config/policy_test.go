package config

import (
	"errors"
	"reflect"
	"testing"
)

// A policy decodes with its defaults (default "deny", effect "allow"),
// on servers and endpoints.
func TestParsePolicy(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x", "policy": {"rules": [
		{"principals": ["alice"], "tools": ["read_*"], "prompts": []},
		{"effect": "deny", "scopes": ["guest"], "when": "principal.kind == 'key'", "resources": ["file:///*"]}
	]}}}, "gateway": {"endpoints": {"e": {"servers": ["a"], "policy": {"default": "allow"}}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Policy{Default: PolicyDeny, Rules: []PolicyRule{
		{Effect: PolicyAllow, Principals: []string{"alice"}, Tools: []string{"read_*"}, Prompts: []string{}},
		{Effect: PolicyDeny, Scopes: []string{"guest"}, When: "principal.kind == 'key'", Resources: []string{"file:///*"}},
	}}
	if got := cfg.Servers["a"].Policy; !reflect.DeepEqual(got, want) {
		t.Errorf("server policy %+v, want %+v", got, want)
	}
	if got := cfg.Endpoints["e"].Policy; got == nil || got.Default != PolicyAllow || got.Rules != nil {
		t.Errorf("endpoint policy %+v", got)
	}
	if cfg.Servers["a"].Policy == nil || cfg.Endpoints["all"] == nil || cfg.Endpoints["all"].Policy != nil {
		t.Error("the default endpoint has no policy unless written")
	}
}

// Every mistake in a policy is reported at its key.
func TestParsePolicyProblems(t *testing.T) {
	_, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x", "policy": {"default": "maybe", "rulez": [], "rules": [
		{"effect": "permit", "principals": [""], "tools": ["[a-"], "when": ""},
		"alice",
		{"scopes": "admin", "resources": [""]}
	]}}, "b": {"command": "x", "policy": []}}}`), nil)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("err %v", err)
	}
	ps.sort()
	var got []string
	for _, p := range ps {
		got = append(got, p.Error())
	}
	want := []string{
		`mcpServers.a.policy.default: must be "allow" or "deny", not "maybe"`,
		`mcpServers.a.policy.rules[0].effect: must be "allow" or "deny", not "permit"`,
		`mcpServers.a.policy.rules[0].principals[0]: must not be empty`,
		`mcpServers.a.policy.rules[0].tools[0]: "[a-" is not a valid pattern (path.Match syntax: * ? [a-z] \)`,
		`mcpServers.a.policy.rules[0].when: must not be empty (leave it out to match every principal)`,
		`mcpServers.a.policy.rules[1]: must be an object like {"principals": ["alice"], "tools": ["search_*"]}`,
		`mcpServers.a.policy.rules[2].resources[0]: "" is not a valid pattern (path.Match syntax: * ? [a-z] \)`,
		`mcpServers.a.policy.rules[2].scopes: must be an array of strings`,
		`mcpServers.a.policy.rulez: unknown key`,
		`mcpServers.b.policy: must be an object like {"rules": [{"principals": ["alice"], "tools": ["*"]}]}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", joinLines(got), joinLines(want))
	}
}

func joinLines(ss []string) string {
	out := ""
	for _, s := range ss {
		out += "  " + s + "\n"
	}
	return out
}
