package policy

import (
	"encoding/json"
	"errors"
	"path"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
)

var (
	alice = &auth.Principal{Name: "alice", Kind: auth.KindKey, Scopes: []string{"mcp"}}
	bob   = &auth.Principal{Name: "https://as.example.com#bob", Kind: auth.KindToken, Issuer: "https://as.example.com",
		Scopes: []string{"mcp", "admin"}, Claims: map[string]any{"email": "bob@example.com", "groups": []any{"ops"}, "level": 3.0}}
)

func compile(t *testing.T, def string, rules ...config.PolicyRule) *Policy {
	t.Helper()
	for i := range rules {
		if rules[i].Effect == "" {
			rules[i].Effect = config.PolicyAllow
		}
	}
	p, err := Compile("mcpServers.s.policy", "s", &config.Policy{Default: def, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The first rule about the item that matches the principal decides; none:
// the default.
func TestAllowsFirstMatch(t *testing.T) {
	p := compile(t, config.PolicyDeny,
		config.PolicyRule{Effect: config.PolicyDeny, Tools: []string{"delete_*"}},
		config.PolicyRule{Principals: []string{"alice"}, Tools: []string{"*"}, Resources: []string{"file:///pub/*"}},
		config.PolicyRule{Scopes: []string{"admin"}},
		config.PolicyRule{Principals: []string{"*"}, Prompts: []string{"greet"}},
	)
	for _, c := range []struct {
		p          *auth.Principal
		kind, name string
		want       bool
	}{
		{alice, Tool, "search", true},
		{alice, Tool, "delete_all", false}, // the deny comes first
		{bob, Tool, "delete_all", false},   // for everyone
		{bob, Tool, "search", true},        // by scope
		{alice, Resource, "file:///pub/a", true},
		{alice, Resource, "file:///pub/a/b", false}, // * stops at '/'
		{alice, Resource, "file:///priv/a", false},
		{alice, Prompt, "greet", true},  // "*": every authenticated principal
		{nil, Prompt, "greet", false},   // not the anonymous one
		{alice, Prompt, "other", false}, // the default
		{nil, Tool, "search", false},
	} {
		if got := p.Allows(c.p, c.kind, c.name, nil); got != c.want {
			t.Errorf("Allows(%v, %s %q) = %v, want %v", c.p, c.kind, c.name, got, c.want)
		}
	}
	var none *Policy
	if !none.Allows(nil, Tool, "x", nil) || !none.AllowsAll(nil, Tool) {
		t.Error("a nil policy must allow everything")
	}
	if !compile(t, config.PolicyAllow).Allows(nil, Tool, "x", nil) {
		t.Error(`default "allow" with no rules must allow`)
	}
}

// Expressions see the principal, the item, the target and a call's
// arguments; one that fails does not match.
func TestAllowsExpressions(t *testing.T) {
	p := compile(t, config.PolicyDeny,
		config.PolicyRule{When: `principal.claims.email.endsWith("@example.com") && "ops" in principal.claims.groups`, Tools: []string{"ops_*"}},
		config.PolicyRule{When: `principal.kind == "key" && target == "s" && kind == "tool" && name.startsWith("read")`},
		config.PolicyRule{When: `has(arguments.path) && arguments.path.startsWith("/tmp/")`, Tools: []string{"write"}},
		config.PolicyRule{When: `principal.claims.level > 2`, Prompts: []string{"*"}},
	)
	for _, c := range []struct {
		p          *auth.Principal
		kind, name string
		args       string
		want       bool
	}{
		{bob, Tool, "ops_restart", "", true},
		{alice, Tool, "ops_restart", "", false}, // no claims: the expression fails
		{alice, Tool, "read_file", "", true},
		{bob, Tool, "read_file", "", false}, // a token
		{alice, Tool, "write", `{"path":"/tmp/x"}`, true},
		{alice, Tool, "write", `{"path":"/etc/passwd"}`, false},
		{alice, Tool, "write", ``, false},
		{alice, Tool, "write", `[1,2]`, false}, // not an object: {}
		{bob, Prompt, "p", "", true},
		{nil, Prompt, "p", "", false},
	} {
		if got := p.Allows(c.p, c.kind, c.name, json.RawMessage(c.args)); got != c.want {
			t.Errorf("Allows(%v, %s %q, %s) = %v, want %v", c.p, c.kind, c.name, c.args, got, c.want)
		}
	}
}

// Compile reports each expression that does not compile or is not
// boolean, naming its key, in one error.
func TestCompileProblems(t *testing.T) {
	_, err := Compile("gateway.endpoints.e.policy", "e", &config.Policy{Rules: []config.PolicyRule{
		{When: `principal.name ==`},
		{When: `true`},
		{When: `"text"`},
		{When: `nosuch.var`},
	}})
	var ps config.Problems
	if !errors.As(err, &ps) || len(ps) != 3 {
		t.Fatalf("err %v, want 3 problems", err)
	}
	for i, want := range []string{"rules[0].when: 1:18: Syntax error", "rules[2].when: must be a boolean expression", "rules[3].when: 1:1: undeclared reference to 'nosuch'"} {
		if got := ps[i].Error(); !strings.HasPrefix(got, "gateway.endpoints.e.policy.") || !strings.Contains(got, want) || strings.Contains(got, "\n") {
			t.Errorf("problem %d: %q, want one line with %q", i, got, want)
		}
	}
}

// An expression that would run long is stopped by the cost limit, and
// does not match.
func TestCostLimit(t *testing.T) {
	p := compile(t, config.PolicyDeny, config.PolicyRule{When: `arguments.list.all(x, arguments.list.all(y, x + y >= 0))`})
	list := make([]int, 2000)
	args, _ := json.Marshal(map[string]any{"list": list})
	if p.Allows(alice, Tool, "t", args) {
		t.Fatal("an expression past the cost limit matched")
	}
	short, _ := json.Marshal(map[string]any{"list": list[:10]})
	if !p.Allows(alice, Tool, "t", short) {
		t.Fatal("the same expression on a short list did not match")
	}
}

// AllowsAll is true only when Allows is for every name: lists are left
// unfiltered on its word.
func TestAllowsAll(t *testing.T) {
	for _, c := range []struct {
		rules []config.PolicyRule
		def   string
		p     *auth.Principal
		want  bool
	}{
		{nil, config.PolicyAllow, nil, true},
		{nil, config.PolicyDeny, alice, false},
		{[]config.PolicyRule{{Principals: []string{"alice"}}}, config.PolicyDeny, alice, true},
		{[]config.PolicyRule{{Principals: []string{"alice"}}}, config.PolicyDeny, bob, false},
		{[]config.PolicyRule{{Effect: config.PolicyDeny, Tools: []string{"x"}}}, config.PolicyAllow, alice, false},
		{[]config.PolicyRule{{Effect: config.PolicyDeny, Prompts: []string{"x"}}}, config.PolicyAllow, alice, true}, // about prompts only
		{[]config.PolicyRule{{Tools: []string{"a*"}}}, config.PolicyAllow, alice, true},
		{[]config.PolicyRule{{When: "false"}}, config.PolicyDeny, alice, false},
	} {
		p := compile(t, c.def, c.rules...)
		if got := p.AllowsAll(c.p, Tool); got != c.want {
			t.Errorf("AllowsAll(%+v, default %s, %v) = %v, want %v", c.rules, c.def, c.p, got, c.want)
		}
	}
}

// FuzzAllowsAll: whenever AllowsAll says a principal may use every tool,
// Allows agrees for any name and arguments.
func FuzzAllowsAll(f *testing.F) {
	f.Add("a*", "b", "alice", true, false, "x", `{"k":1}`)
	f.Add("*", "", "*", false, true, "abc", ``)
	f.Fuzz(func(t *testing.T, pat1, pat2, who string, allow1, defAllow bool, name, args string) {
		if !validPattern(pat1) || !validPattern(pat2) || who == "" {
			return
		}
		eff := func(b bool) string {
			if b {
				return config.PolicyAllow
			}
			return config.PolicyDeny
		}
		p := compile(t, eff(defAllow),
			config.PolicyRule{Effect: eff(allow1), Tools: []string{pat1}},
			config.PolicyRule{Effect: eff(!allow1), Principals: []string{who}, Tools: []string{pat2}},
			config.PolicyRule{Effect: eff(allow1), When: `name.size() % 2 == 0`},
		)
		var obj map[string]any
		if args != "" && (jsonv2.Unmarshal([]byte(args), &obj) != nil || obj == nil) {
			// Arguments that are not one plain object deny any call a
			// "when" judges (lists, which AllowsAll is for, have none).
			args = ""
		}
		for _, pr := range []*auth.Principal{nil, alice, bob} {
			if p.AllowsAll(pr, Tool) && !p.Allows(pr, Tool, name, json.RawMessage(args)) {
				t.Fatalf("AllowsAll(%v) but not Allows(%q)", pr, name)
			}
		}
	})
}

func validPattern(p string) bool {
	if p == "" {
		return false
	}
	_, err := path.Match(p, "")
	return err == nil
}
