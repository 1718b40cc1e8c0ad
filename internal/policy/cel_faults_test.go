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
