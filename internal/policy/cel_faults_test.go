package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

// A deny rule whose expression the request itself makes too costly to
// evaluate (a call's arguments, a URI, both the client's to write) refuses
// the request: one that cannot be judged is not let through. It did not
// match, so a deny-list over arguments ("default": "allow") let through
// exactly the calls that hid what it denies behind enough elements: the
// path under /etc/ last of 100,000.
func TestCostlyDenyRuleRefuses(t *testing.T) {
	p := compile(t, config.PolicyAllow,
		config.PolicyRule{Effect: config.PolicyDeny, Tools: []string{"read"}, When: `arguments.paths.exists(p, p.startsWith("/etc/"))`},
		config.PolicyRule{Effect: config.PolicyDeny, When: `kind == "resource" && [name, name, name, name, name, name, name, name, name, name].exists(n, n.matches("^file:///(a+)+secret$"))`},
	)
	paths := func(n int, last string) json.RawMessage {
		return json.RawMessage(`{"paths":[` + strings.Repeat(`"/home/a",`, n) + `"` + last + `"]}`)
	}
	if !p.Allows(alice, Tool, "read", paths(3, "/home/b")) || p.Allows(alice, Tool, "read", paths(3, "/etc/shadow")) {
		t.Fatal("the deny rule does not decide small calls")
	}
	if p.Allows(alice, Tool, "read", paths(100000, "/etc/shadow")) {
		t.Error("a path under /etc/ after 100,000 others was allowed past a deny rule")
	}
	if p.Allows(alice, Tool, "read", paths(100000, "/home/b")) {
		t.Error("a call too costly to judge was allowed (no rule could tell whether it denies it)")
	}
	if p.Allows(alice, Resource, "file:///"+strings.Repeat("a", 1000000)+"secret", nil) {
		t.Error("a URI too costly to match against a deny rule was allowed")
	}
	// What the rules do not apply to is not evaluated, so not refused.
	if !p.Allows(alice, Tool, "write", paths(100000, "/etc/shadow")) {
		t.Error("a tool no rule is about was refused")
	}
}

// A deny rule whose expression fails on a request (an argument of another
// type, a missing claim) refuses it: skipped, it would let exactly those
// requests through ({"path": ["/etc/shadow"]} past a rule on a string
// path). An allow rule that fails does not match: the next rule decides.
func TestFailingDenyRuleRefuses(t *testing.T) {
	p := compile(t, config.PolicyAllow,
		config.PolicyRule{Effect: config.PolicyDeny, Tools: []string{"read"}, When: `arguments.path.startsWith("/etc/")`},
		config.PolicyRule{Effect: config.PolicyDeny, Tools: []string{"team"}, When: `principal.claims.team == "contractors"`},
	)
	for _, tc := range []struct {
		what, tool, args string
		allow            bool
	}{
		{"a path outside /etc/", "read", `{"path":"/home/a"}`, true},
		{"a path under /etc/", "read", `{"path":"/etc/shadow"}`, false},
		{"the path as an array", "read", `{"path":["/etc/shadow"]}`, false},
		{"the path as a number", "read", `{"path":1}`, false},
		{"no path", "read", `{}`, false},
		{"a claim the principal lacks", "team", `{}`, false},
		{"a tool no rule is about", "write", `{"path":["/etc/shadow"]}`, true},
	} {
		if got := p.Allows(alice, Tool, tc.tool, json.RawMessage(tc.args)); got != tc.allow {
			t.Errorf("%s: allowed %v, want %v", tc.what, got, tc.allow)
		}
	}
	guarded := compile(t, config.PolicyAllow,
		config.PolicyRule{Effect: config.PolicyDeny, Tools: []string{"team"}, When: `has(principal.claims.team) && principal.claims.team == "contractors"`},
	)
	if !guarded.Allows(alice, Tool, "team", json.RawMessage(`{}`)) {
		t.Error("a guarded deny rule refused a principal without the claim")
	}
	allowFails := compile(t, config.PolicyDeny,
		config.PolicyRule{Effect: config.PolicyAllow, Tools: []string{"read"}, When: `arguments.path.startsWith("/home/")`},
		config.PolicyRule{Effect: config.PolicyAllow, Tools: []string{"read"}},
	)
	if !allowFails.Allows(alice, Tool, "read", json.RawMessage(`{"path":[1]}`)) {
		t.Error("an allow rule that failed stopped the next rule from deciding")
	}
}
