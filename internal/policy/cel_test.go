package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
)

// Expressions are type-checked against the variables as Allows binds
// them: a misspelt field of principal or a comparison of the wrong type
// is a problem at the rule's key when the config is loaded, not an
// expression that silently never matches.
func TestCompileTypeChecks(t *testing.T) {
	for _, c := range []struct {
		when string
		want string // a substring of the problem; "" when it compiles
	}{
		{`principal.name == "alice"`, ""},
		{`principal.kind == "key" && principal.issuer == ""`, ""},
		{`"admin" in principal.scopes && principal.scopes.size() > 1`, ""},
		{`principal.claims.email.endsWith("@example.com")`, ""}, // claims are dynamic
		{`has(principal.claims.groups) && "ops" in principal.claims.groups`, ""},
		{`kind == "tool" && name.startsWith("read_") && target == "s"`, ""},
		{`arguments.path.startsWith("/tmp/") && arguments.size() < 3`, ""},
		{`has(arguments.n) && arguments.n > 2`, ""},

		{`principal.nme == 1`, "1:10: undefined field 'nme' (principal has name, kind, scopes, claims, issuer)"},
		{`has(principal.scope)`, "undefined field 'scope'"},
		{`principal.name == 1`, "no matching overload for '_==_' applied to '(string, int)'"},
		{`principal.scopes == "admin"`, "no matching overload"},
		{`principal.name.size() > "3"`, "no matching overload"},
		{`kind == 1`, "no matching overload"},
		{`target.startsWith(1)`, "no matching overload"},
		{`arguments == "x"`, "no matching overload"},
		{`principal["name"] == "alice"`, "no matching overload for '_[_]'"},
		{`principal.name`, "must be a boolean expression, not one of type string"},
		{`princpal.name == "alice"`, "undeclared reference to 'princpal'"},
	} {
		_, err := Compile("mcpServers.s.policy", "s", &config.Policy{Default: config.PolicyDeny,
			Rules: []config.PolicyRule{{Effect: config.PolicyAllow}, {Effect: config.PolicyAllow, When: c.when}}})
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want it to compile", c.when, err)
			}
			continue
		}
		var ps config.Problems
		if !errors.As(err, &ps) || len(ps) != 1 {
			t.Errorf("%s: err %v, want one problem", c.when, err)
			continue
		}
		if ps[0].Path != "mcpServers.s.policy.rules[1].when" || !strings.Contains(ps[0].Msg, c.want) {
			t.Errorf("%s: %q, want at mcpServers.s.policy.rules[1].when: ...%s...", c.when, ps[0].Error(), c.want)
		}
	}
}

// The typed principal is bound with the values Allows was given: each
// field reads what the auth package found, the anonymous principal has
// empty ones (not missing ones, which would fail the expression).
func TestPrincipalFieldsBound(t *testing.T) {
	for _, c := range []struct {
		when string
		p    *auth.Principal
		want bool
	}{
		{`principal.name == "alice" && principal.kind == "key"`, alice, true},
		{`principal.name == "alice"`, bob, false},
		{`principal.issuer == "https://as.example.com" && principal.kind == "token"`, bob, true},
		{`"admin" in principal.scopes`, bob, true},
		{`"admin" in principal.scopes`, alice, false},
		{`principal.claims.level >= 3.0`, bob, true},
		{`principal.kind == "anonymous" && principal.name == "" && principal.scopes.size() == 0 && principal.claims.size() == 0`, nil, true},
		{`has(principal.claims.email)`, alice, false},
	} {
		p := compile(t, config.PolicyDeny, config.PolicyRule{When: c.when})
		if got := p.Allows(c.p, Tool, "t", json.RawMessage(`{}`)); got != c.want {
			t.Errorf("%s for %v: %v, want %v", c.when, c.p, got, c.want)
		}
	}
}

// A disabled server's policy is checked like the others'.
func TestFromConfigChecksDisabled(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "disabled": true,
		"policy": {"rules": [{"when": "principal.nme == \"x\""}]}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = FromConfig(cfg)
	var ps config.Problems
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Path != "mcpServers.b.policy.rules[0].when" {
		t.Errorf("FromConfig: %v, want the disabled server's expression", err)
	}
}
