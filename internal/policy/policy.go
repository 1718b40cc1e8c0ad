// Package policy decides which principals may list and use which tools,
// prompts and resources of a server or endpoint: the compiled form of a
// config.Policy, with its CEL expressions checked when the config is
// loaded and evaluated per item. It knows the config's description and
// the auth package's principals, nothing of HTTP or sessions; the HTTP
// front and the endpoints ask it through an interface of their own.
package policy

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"

	"cel.dev/cel-go/cel"
	jsonv2 "github.com/go-json-experiment/json"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
)

// Kinds of items a policy decides on.
const (
	Tool     = "tool"
	Prompt   = "prompt"
	Resource = "resource" // resources by URI, templates by URI template
)

// Policy is a compiled config.Policy. It is immutable and safe for
// concurrent use.
type Policy struct {
	target string // the server's or endpoint's name, for "target"
	allow  bool   // the default
	rules  []rule
	when   bool // some rule has an expression
}

type rule struct {
	allow      bool
	principals []string
	scopes     []string
	when       cel.Program // nil: none
	// items by kind; all: the rule names no kind, so it is about every
	// item.
	tools, prompts, resources []string
	all                       bool
}

// Compile compiles the policy of the server or endpoint target, written
// at path p of the config ("mcpServers.memory.policy"). A nil cfg gives
// a nil Policy, which allows everything. The error is config.Problems,
// each naming the key it is about.
func Compile(p, target string, cfg *config.Policy) (*Policy, error) {
	if cfg == nil {
		return nil, nil
	}
	pol := &Policy{target: target, allow: cfg.Default == config.PolicyAllow}
	var problems config.Problems
	for i, rc := range cfg.Rules {
		r := rule{
			allow:      rc.Effect != config.PolicyDeny,
			principals: rc.Principals, scopes: rc.Scopes,
			tools: rc.Tools, prompts: rc.Prompts, resources: rc.Resources,
			all: rc.Tools == nil && rc.Prompts == nil && rc.Resources == nil,
		}
		if rc.When != "" {
			prg, err := compileWhen(rc.When)
			if err != nil {
				problems = append(problems, config.Problem{Path: fmt.Sprintf("%s.rules[%d].when", p, i), Msg: err.Error()})
				continue
			}
			r.when, pol.when = prg, true
		}
		pol.rules = append(pol.rules, r)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return pol, nil
}

// Allows reports whether principal pr (nil: anonymous) may see and use
// the item of kind (Tool, Prompt, Resource) named name (a URI or URI
// template for resources); args are a call's arguments (nil in lists). A
// nil Policy allows everything.
func (p *Policy) Allows(pr *auth.Principal, kind, name string, args json.RawMessage) bool {
	if p == nil {
		return true
	}
	var vars map[string]any // built once, for the first expression
	for i := range p.rules {
		r := &p.rules[i]
		if !r.about(kind, name) || !r.matches(pr) {
			continue
		}
		if r.when != nil {
			if vars == nil {
				var ok bool
				if vars, ok = p.vars(pr, kind, name, args); !ok {
					// Arguments that are not one plain object (a member
					// named twice: which would the server read?) are not
					// judged: refused.
					return false
				}
			}
			matched, failed, cut := eval(r.when, vars)
			switch {
			case cut:
				return false // too costly to tell: refused (cel.go)
			case failed && !r.allow:
				// A deny rule that cannot tell whether it applies (an
				// argument of another type, a missing claim) refuses:
				// skipping it would let exactly such requests through.
				return false
			case !matched:
				continue // an allow rule that failed does not match
			}
		}
		return r.allow
	}
	return p.allow
}

// about reports whether the rule is about the item.
func (r *rule) about(kind, name string) bool {
	if r.all {
		return true
	}
	var pats []string
	switch kind {
	case Tool:
		pats = r.tools
	case Prompt:
		pats = r.prompts
	default:
		pats = r.resources
	}
	for _, pat := range pats {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// matches reports whether pr passes the rule's principals and scopes.
func (r *rule) matches(pr *auth.Principal) bool {
	if r.principals != nil {
		if pr == nil {
			return false
		}
		if !slices.Contains(r.principals, "*") && !slices.Contains(r.principals, pr.Name) {
			return false
		}
	}
	for _, s := range r.scopes {
		if pr == nil || !slices.Contains(pr.Scopes, s) {
			return false
		}
	}
	return true
}

// AllowsAll reports whether the policy lets pr use every item of kind
// whatever its name and arguments: lists need no filtering then.
func (p *Policy) AllowsAll(pr *auth.Principal, kind string) bool {
	if p == nil {
		return true
	}
	for i := range p.rules {
		r := &p.rules[i]
		if !r.all && !r.namesKind(kind) || !r.matches(pr) {
			continue
		}
		if r.all && r.when == nil {
			return r.allow // the first rule that surely applies decides
		}
		if !r.allow {
			return false // it may deny some item
		}
	}
	return p.allow
}

// namesKind reports whether the rule has patterns for kind.
func (r *rule) namesKind(kind string) bool {
	switch kind {
	case Tool:
		return r.tools != nil
	case Prompt:
		return r.prompts != nil
	}
	return r.resources != nil
}

// vars are the expressions' variables; ok false when args are present
// and not a JSON object without duplicate members.
func (p *Policy) vars(pr *auth.Principal, kind, name string, args json.RawMessage) (vars map[string]any, ok bool) {
	who := principal{Kind: "anonymous", Scopes: []string{}, Claims: map[string]any{}}
	if pr != nil {
		who.Name, who.Kind, who.Issuer = pr.Name, pr.Kind, pr.Issuer
		if pr.Scopes != nil {
			who.Scopes = pr.Scopes
		}
		if pr.Claims != nil {
			who.Claims = pr.Claims
		}
	}
	arguments := map[string]any{}
	if len(args) > 0 && string(args) != "null" {
		// Strictly (go-json-experiment: duplicate names are an error),
		// numbers as float64 as encoding/json gives them.
		if err := jsonv2.Unmarshal(args, &arguments); err != nil || arguments == nil {
			return nil, false
		}
	}
	return map[string]any{"principal": who, "kind": kind, "name": name, "target": p.target, "arguments": arguments}, true
}

// Set is the compiled policies of a config: by server name and by
// endpoint name; a target without a policy is not in it.
type Set struct {
	Servers, Endpoints map[string]*Policy
}

// FromConfig compiles every policy of cfg. The error is config.Problems,
// one per expression that does not compile, naming its key.
func FromConfig(cfg *config.Config) (Set, error) {
	set := Set{Servers: map[string]*Policy{}, Endpoints: map[string]*Policy{}}
	var problems config.Problems
	add := func(dst map[string]*Policy, p, name string, c *config.Policy) {
		pol, err := Compile(p, name, c)
		if ps, ok := err.(config.Problems); ok {
			problems = append(problems, ps...)
		} else if pol != nil {
			dst[name] = pol
		}
	}
	for name, s := range cfg.Servers {
		add(set.Servers, "mcpServers."+name+".policy", name, s.Policy)
	}
	for name, e := range cfg.Endpoints {
		add(set.Endpoints, "gateway.endpoints."+name+".policy", name, e.Policy)
	}
	// A disabled server's policy is checked too (enabling the server
	// must not reveal a bad expression), and used nowhere.
	unused := map[string]*Policy{}
	for name, s := range cfg.Disabled {
		add(unused, "mcpServers."+name+".policy", name, s.Policy)
	}
	if len(problems) > 0 {
		return Set{}, problems
	}
	return set, nil
}
