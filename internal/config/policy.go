package config

import (
	"encoding/json"
	"path"
)

// Policy is a server's or endpoint's "policy" key: which principals may
// list and use which of its tools, prompts and resources. The rules are
// tried in order; the first that matches both the principal and the item
// decides, and when none does, Default does. Items a principal may not use
// are left out of its lists, and a request naming one is answered with a
// JSON-RPC error without reaching the server. internal/policy compiles
// and evaluates it; this is only its description.
//
// A server's policy applies wherever the server is served: at
// /servers/NAME/mcp and as a member of every endpoint (by its own names).
// An endpoint's policy applies to what the endpoint exposes (by the names
// it exposes them under), on top of its members' policies.
type Policy struct {
	// Default decides when no rule matches (key "default"): "deny" (the
	// default) or "allow".
	Default string
	// Rules are tried in order (key "rules").
	Rules []PolicyRule
}

// PolicyRule is one entry of a policy's "rules".
type PolicyRule struct {
	// Effect is "allow" (the default) or "deny" (key "effect").
	Effect string

	// The rule matches a principal that passes all of these (each unset
	// one passes everyone, the anonymous principal included):
	//
	// Principals lists names (key "principals"): an API key's name, a
	// token's subject (prefixed by its issuer and "#" when several
	// issuers are trusted); "*" is every authenticated principal.
	Principals []string
	// Scopes must all be the principal's (key "scopes").
	Scopes []string
	// When is a CEL expression that must be true (key "when"), over
	// principal (an object with exactly the fields name, kind
	// "key"/"token"/"anonymous", issuer (strings), scopes (a list of
	// strings) and claims (a map)), kind ("tool", "prompt", "resource"),
	// name (a tool's or prompt's name, a resource's URI or template),
	// target (the server's or endpoint's name), all strings, and
	// arguments (a call's arguments, a map; {} in lists). It is
	// type-checked when the config is loaded: an unknown field or a type
	// error is a problem at its key. An expression that fails when
	// evaluated (a missing claim) does not match.
	When string

	// Tools, Prompts and Resources are the items the rule is about (keys
	// "tools", "prompts", "resources"): globs in path.Match syntax over
	// tool and prompt names and resource URIs and URI templates. A rule
	// with none of the three is about every item; one with some is about
	// the kinds it names only.
	Tools, Prompts, Resources []string
}

// Policy effects and defaults.
const (
	PolicyAllow = "allow"
	PolicyDeny  = "deny"
)

// policy decodes a "policy" key.
func (d *decoder) policy(p string, raw json.RawMessage, dst **Policy) {
	pol := &Policy{Default: PolicyDeny}
	if !d.fields(p, raw, `an object like {"rules": [{"principals": ["alice"], "tools": ["*"]}]}`, func(key, p string, v json.RawMessage) bool {
		switch key {
		case "default":
			if d.str(p, v, &pol.Default, false) && pol.Default != PolicyAllow && pol.Default != PolicyDeny {
				d.problems.add(p, `must be "allow" or "deny", not %q`, pol.Default)
			}
		case "rules":
			d.policyRules(p, v, &pol.Rules)
		default:
			return false
		}
		return true
	}) {
		return
	}
	*dst = pol
}

// policyRules decodes a policy's "rules" array.
func (d *decoder) policyRules(p string, raw json.RawMessage, dst *[]PolicyRule) {
	elems, ok := array(raw)
	if !ok {
		d.problems.add(p, "must be an array of rules")
		return
	}
	rules := make([]PolicyRule, 0, len(elems))
	for i, e := range elems {
		rp := index(p, i)
		r := PolicyRule{Effect: PolicyAllow}
		d.fields(rp, e, `an object like {"principals": ["alice"], "tools": ["search_*"]}`, func(key, p string, v json.RawMessage) bool {
			switch key {
			case "effect":
				if d.str(p, v, &r.Effect, false) && r.Effect != PolicyAllow && r.Effect != PolicyDeny {
					d.problems.add(p, `must be "allow" or "deny", not %q`, r.Effect)
				}
			case "principals":
				d.nonEmptyStrs(p, v, &r.Principals)
			case "scopes":
				d.nonEmptyStrs(p, v, &r.Scopes)
			case "when":
				if d.str(p, v, &r.When, false) && r.When == "" {
					d.problems.add(p, "must not be empty (leave it out to match every principal)")
				}
			case "tools":
				d.patterns(p, v, &r.Tools)
			case "prompts":
				d.patterns(p, v, &r.Prompts)
			case "resources":
				d.patterns(p, v, &r.Resources)
			default:
				return false
			}
			return true
		})
		rules = append(rules, r)
	}
	*dst = rules
}

// nonEmptyStrs decodes an array of strings none of which is empty.
func (d *decoder) nonEmptyStrs(p string, raw json.RawMessage, dst *[]string) {
	d.strs(p, raw, dst, false)
	for i, s := range *dst {
		if s == "" {
			d.problems.add(index(p, i), "must not be empty")
		}
	}
}

// patterns decodes an array of path.Match globs.
func (d *decoder) patterns(p string, raw json.RawMessage, dst *[]string) {
	d.strs(p, raw, dst, false)
	for i, pat := range *dst {
		if _, err := path.Match(pat, ""); err != nil || pat == "" {
			d.problems.add(index(p, i), "%q is not a valid pattern (path.Match syntax: * ? [a-z] \\)", pat)
		}
	}
}
