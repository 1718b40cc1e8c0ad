package config

import (
	"encoding/json"
	"path"
	"sort"
	"strings"
)

// DefaultEndpoint is the name of the endpoint that merges every server
// unless the file turns it off ("gateway": {"endpoints": {"all": false}})
// or defines it itself.
const DefaultEndpoint = "all"

// Endpoint defaults and bounds.
const (
	// DefaultSeparator goes between a server's prefix and a tool or
	// prompt name: "memory__create_entities".
	DefaultSeparator = "__"
	// DefaultMaxNameLength is the longest exposed tool or prompt name,
	// the limit many model APIs impose.
	DefaultMaxNameLength = 64
	// MinMaxNameLength leaves a shortened name room for a stable hash
	// suffix and some of the name it stands for.
	MinMaxNameLength = 16
	// MaxMaxNameLength is the longest tool name the MCP specification
	// recommends.
	MaxMaxNameLength = 128
	// DefaultMaxListBytes bounds what an endpoint keeps of its merged
	// lists: room for a member of 100,000 tools and some policy views.
	DefaultMaxListBytes = 256 << 20
	// MinMaxListBytes: less would refuse the lists of ordinary servers.
	MinMaxListBytes = 1 << 20
)

// Globs are the allow and deny patterns of one kind of item (keys "allow"
// and "deny"), in path.Match syntax ("*" does not cross a '/'). An empty
// allow list allows everything; deny wins over allow. Tool and prompt
// patterns match the server's own names (before any prefix), resource
// patterns match URIs.
type Globs struct {
	// Allow lists the patterns an item must match (key "allow").
	Allow []string
	// Deny lists the patterns an item must not match (key "deny").
	Deny []string
}

// Endpoint is one entry of "gateway.endpoints": one MCP endpoint, at
// /endpoints/NAME/mcp, merging several servers' tools, prompts and
// resources.
type Endpoint struct {
	// Name is the entry's key; it appears in URLs (/endpoints/NAME/...)
	// and must match [A-Za-z0-9._-]+. An endpoint may share a server's
	// name: they are served at different URLs.
	Name string

	// Servers names the member servers, keys of "mcpServers" (key
	// "servers"), at least one, each once. Required, except for the
	// endpoint "all", where it defaults to every server.
	Servers []string

	// Tools, Prompts and Resources filter what the endpoint exposes, on
	// top of each member server's own filters (keys "tools", "prompts",
	// "resources"); like those, they match the servers' own tool and
	// prompt names (before the prefix) and resource URIs. Default:
	// everything.
	Tools, Prompts, Resources Globs

	// Separator goes between a server's prefix and a name (key
	// "separator"): letters, digits, '_', '-' or '.'. Default "__".
	Separator string

	// MaxNameLength is the longest tool or prompt name exposed (key
	// "maxNameLength"), from 16 to 128; a longer one is shortened with a
	// stable hash suffix and still routes back. Default 64.
	MaxNameLength int

	// SnakeCase exposes names in snake_case (key "snakeCase"), mapped back
	// exactly on calls. Default false.
	SnakeCase bool

	// Auth overrides gateway.auth for this endpoint (key "auth"), as a
	// server's "auth" does. Default nil.
	Auth *TargetAuth

	// PageSize is the most items one page of a merged list holds (key
	// "pageSize"). Default 0: never paged, every member's pages followed
	// by the gateway and the whole merged list answered at once, since
	// many clients read only the first page of a list.
	PageSize int

	// MaxListBytes bounds the bytes the endpoint keeps of its lists (key
	// "maxListBytes"): the members' lists and the merged lists built from
	// them, shared by every session. A member's list or a merged list
	// larger than the bound is refused (the list request gets an error
	// naming this key); merged lists past it are evicted, least recently
	// used first, and built again when asked for. Default 268435456
	// (256 MiB), at least 1048576.
	MaxListBytes int64

	// Policy decides which principals may list and use which of the
	// items the endpoint exposes, by their exposed names (key "policy";
	// see [Policy]). Its members' own policies apply too. Default nil:
	// everyone may use everything.
	Policy *Policy

	// implicit: the default endpoint "all", not written in the file.
	implicit bool
}

// NewEndpoint returns an endpoint named name merging servers, with every
// other setting at its default.
func NewEndpoint(name string, servers []string) *Endpoint {
	return &Endpoint{Name: name, Servers: servers, Separator: DefaultSeparator, MaxNameLength: DefaultMaxNameLength, MaxListBytes: DefaultMaxListBytes}
}

// EndpointNames returns the endpoint names in sorted order.
func (c *Config) EndpointNames() []string {
	names := make([]string, 0, len(c.Endpoints))
	for name := range c.Endpoints {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// endpoints decodes the "gateway.endpoints" object at path into
// cfg.Endpoints. "all": false turns the default endpoint off.
func (d *decoder) endpoints(path string, raw json.RawMessage, cfg *Config) {
	d.fields(path, raw, "an object of endpoints", func(name, p string, v json.RawMessage) bool {
		if kind(v) != '{' {
			if name == DefaultEndpoint && string(trimSpace(v)) == "false" {
				d.noDefaultEndpoint = true
				return true
			}
			if name == DefaultEndpoint {
				d.problems.add(p, `must be an object, or false to turn the default endpoint off`)
			} else {
				d.problems.add(p, `must be an object like {"servers": ["a", "b"]}`)
			}
			return true
		}
		e := NewEndpoint(name, nil)
		d.fields(p, v, "an object", func(key, p string, v json.RawMessage) bool {
			switch key {
			case "servers":
				d.strs(p, v, &e.Servers, false)
			case "tools":
				d.globs(p, v, &e.Tools)
			case "prompts":
				d.globs(p, v, &e.Prompts)
			case "resources":
				d.globs(p, v, &e.Resources)
			case "separator":
				d.str(p, v, &e.Separator, false)
			case "maxNameLength":
				d.integer(p, v, &e.MaxNameLength)
			case "snakeCase":
				d.boolean(p, v, &e.SnakeCase)
			case "pageSize":
				d.integer(p, v, &e.PageSize)
			case "maxListBytes":
				d.int64(p, v, &e.MaxListBytes)
			case "auth":
				d.targetAuth(p, v, &e.Auth)
			case "policy":
				d.policy(p, v, &e.Policy)
			default:
				return false
			}
			return true
		})
		cfg.Endpoints[name] = e
		return true
	})
}

// globs decodes {"allow": [...], "deny": [...]}.
func (d *decoder) globs(path string, raw json.RawMessage, dst *Globs) {
	d.fields(path, raw, `an object like {"allow": ["pattern"], "deny": ["pattern"]}`, func(key, p string, v json.RawMessage) bool {
		switch key {
		case "allow":
			d.strs(p, v, &dst.Allow, false)
		case "deny":
			d.strs(p, v, &dst.Deny, false)
		default:
			return false
		}
		return true
	})
}

// addDefaultEndpoint completes the endpoints after decoding: the default
// endpoint "all" merges every server unless it was turned off, and an
// "all" written without "servers" gets every server.
func (d *decoder) addDefaultEndpoint(cfg *Config) {
	if d.noDefaultEndpoint {
		return
	}
	e := cfg.Endpoints[DefaultEndpoint]
	if e == nil {
		if len(cfg.Servers) == 0 {
			return // "no servers configured" says it all
		}
		e = NewEndpoint(DefaultEndpoint, nil)
		e.implicit = true
		cfg.Endpoints[DefaultEndpoint] = e
	}
	if e.Servers == nil {
		e.Servers = cfg.Names()
	}
}

// checkEndpoints records problems with c's endpoints.
func (c *Config) checkEndpoints(ps *Problems) {
	for _, name := range c.EndpointNames() {
		path := join(join("gateway", "endpoints"), name)
		e := c.Endpoints[name]
		if e == nil {
			ps.add(path, "missing")
			continue
		}
		if !validServerName(name) {
			ps.add(path, "invalid endpoint name %q (use only letters, digits, '.', '_' and '-': it appears in URLs)", name)
		}
		if e.Name != name {
			ps.add(path, "endpoint Name %q differs from its key", e.Name)
		}
		c.checkMembers(ps, e, join(path, "servers"))
		e.Tools.check(ps, join(path, "tools"))
		e.Prompts.check(ps, join(path, "prompts"))
		e.Resources.check(ps, join(path, "resources"))
		switch {
		case e.Separator == "":
			ps.add(join(path, "separator"), `must not be empty (the default is "__")`)
		case !validToolName(e.Separator):
			ps.add(join(path, "separator"), "%q has characters not allowed in tool names (use letters, digits, '_', '-' or '.')", e.Separator)
		}
		if n := e.MaxNameLength; n < MinMaxNameLength || n > MaxMaxNameLength {
			ps.add(join(path, "maxNameLength"), "must be from %d to %d, not %d", MinMaxNameLength, MaxMaxNameLength, n)
		}
		if e.PageSize < 0 {
			ps.add(join(path, "pageSize"), "must be 0 (never page) or more, not %d", e.PageSize)
		}
		if e.MaxListBytes < MinMaxListBytes {
			ps.add(join(path, "maxListBytes"), "must be at least %d, not %d", MinMaxListBytes, e.MaxListBytes)
		}
	}
}

// checkMembers records problems with an endpoint's servers: none, unknown
// or repeated ones, and two with the same non-empty prefix (their names
// would collide).
func (c *Config) checkMembers(ps *Problems, e *Endpoint, path string) {
	if len(e.Servers) == 0 {
		ps.add(path, "must list at least one server")
		return
	}
	hint := ""
	if e.implicit {
		hint = ` (the default endpoint "all" merges every server: set "gateway": {"endpoints": {"all": false}}, or list its servers, to serve them apart)`
	}
	listed := map[string]int{}
	byPrefix := map[string]string{}
	for i, name := range e.Servers {
		p := index(path, i)
		if e.implicit {
			p = strings.TrimSuffix(path, ".servers") // a list the file does not have
		}
		if first, dup := listed[name]; dup {
			ps.add(p, "server %q is already listed at %s", name, index(path, first))
			continue
		}
		listed[name] = i
		s, ok := c.Servers[name]
		if _, off := c.Disabled[name]; off {
			ps.add(p, "server %q is disabled (\"disabled\": true): enable it or leave it out", name)
			continue
		}
		if !ok {
			ps.add(p, "unknown server %q (not in mcpServers)", name)
			continue
		}
		if s == nil || s.Prefix == "" {
			continue
		}
		if other, clash := byPrefix[s.Prefix]; clash {
			ps.add(p, `servers %q and %q have the same prefix %q: their tool and prompt names would collide; give one of them another "prefix"%s`,
				other, name, s.Prefix, hint)
			continue
		}
		byPrefix[s.Prefix] = name
	}
}

// check records problems with the patterns of g.
func (g *Globs) check(ps *Problems, path string) {
	for _, list := range []struct {
		key  string
		pats []string
	}{{"allow", g.Allow}, {"deny", g.Deny}} {
		for i, pat := range list.pats {
			p := index(join(path, list.key), i)
			if pat == "" {
				ps.add(p, "empty pattern (it matches nothing)")
				continue
			}
			if _, err := matchGlob(pat, ""); err != nil {
				ps.add(p, "%q is not a valid pattern (path.Match syntax: *, ?, [a-z], [^a-z], \\* for a literal *)", pat)
			}
		}
	}
}

// matchGlob is path.Match; it checks the whole pattern's syntax whatever
// the name.
func matchGlob(pattern, name string) (bool, error) { return path.Match(pattern, name) }

// validToolName reports whether s uses only the characters the MCP
// specification allows in tool names: ASCII letters, digits, '_', '-' and
// '.'. The empty string is valid (a prefix may be empty).
func validToolName(s string) bool {
	for _, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// checkFilters records problems with a server's own prefix and filters.
func (s *Server) checkFilters(ps *Problems, path string) {
	// The default prefix is the name, whose problems are the name's.
	if s.Prefix != s.Name && !validToolName(s.Prefix) {
		ps.add(join(path, "prefix"), "%q has characters not allowed in tool names (use letters, digits, '_', '-' or '.'; \"\" for none)", s.Prefix)
	}
	s.Tools.check(ps, join(path, "tools"))
	s.Prompts.check(ps, join(path, "prompts"))
	s.Resources.check(ps, join(path, "resources"))
}

// trimSpace is strings.TrimSpace for raw JSON.
func trimSpace(raw json.RawMessage) string { return strings.TrimSpace(string(raw)) }
