package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// keyHash is the SHA-256 of "k" in hex: any valid hash does here.
const keyHash = "8254c329a92850f6d539dd376f4816ee2764517da5e0235514af433164480d7a"

func TestParseAuth(t *testing.T) {
	file := `{"mcpServers": {
	    "memory": {"command": "m"},
	    "open": {"command": "o", "auth": false},
	    "admin": {"command": "a", "auth": {"scopes": ["mcp", "admin"]}},
	    "strict": {"command": "s", "auth": true}
	  },
	  "gateway": {
	    "endpoints": {"team": {"servers": ["memory"], "auth": {"scopes": []}}},
	    "auth": {
	      "oauth": {
	        "issuers": [
	          {"issuer": "https://auth.example.com/realms/mcp",
	           "jwksUrl": "https://auth.example.com/realms/mcp/certs",
	           "audiences": ["mcpgate"],
	           "algorithms": ["RS256", "ES256"],
	           "introspection": {"url": "https://auth.example.com/introspect", "clientId": "gw", "clientSecret": "${SECRET}"}},
	          {"issuer": "http://127.0.0.1:9000"}
	        ],
	        "scopes": ["mcp"],
	        "resourceName": "Team tools"
	      },
	      "apiKeys": [
	        {"name": "ci-bot", "sha256": "` + keyHash + `", "servers": ["memory"], "endpoints": ["team"], "scopes": ["mcp"]},
	        {"name": "file", "keyFile": "${HOME}/key"},
	        {"name": "env", "keyEnv": "MCP_KEY", "servers": ["*"]}
	      ],
	      "publicUrl": "https://gw.example.com/mcpgate",
	      "required": false
	    }
	  }}`
	env := fakeEnv(map[string]string{"SECRET": "s3cret", "HOME": "/home/u", "MCP_KEY": "0123456789abcdef"})
	cfg, err := Parse([]byte(file), env)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &Auth{
		OAuth: &OAuth{
			Issuers: []Issuer{
				{Issuer: "https://auth.example.com/realms/mcp", JWKSURL: "https://auth.example.com/realms/mcp/certs",
					Audiences: []string{"mcpgate"}, Algorithms: []string{"RS256", "ES256"},
					Introspection: &Introspection{URL: "https://auth.example.com/introspect", ClientID: "gw", ClientSecret: "s3cret"}},
				{Issuer: "http://127.0.0.1:9000", Algorithms: AllowedAlgorithms},
			},
			Scopes:       []string{"mcp"},
			ResourceName: "Team tools",
		},
		APIKeys: []APIKey{
			{Name: "ci-bot", SHA256: keyHash, Servers: []string{"memory"}, Endpoints: []string{"team"}, Scopes: []string{"mcp"}},
			{Name: "file", KeyFile: "/home/u/key"},
			{Name: "env", KeyEnv: "MCP_KEY", Servers: []string{"*"}},
		},
		PublicURL: "https://gw.example.com/mcpgate",
		Required:  false,
	}
	if got := cfg.Gateway.Auth; !reflect.DeepEqual(got, want) {
		t.Errorf("auth =\n %+v\nwant\n %+v", got, want)
	}
	targets := map[string]*TargetAuth{
		"memory": nil,
		"open":   {Off: true},
		"admin":  {Scopes: []string{"mcp", "admin"}},
		"strict": {},
	}
	for name, want := range targets {
		if got := cfg.Servers[name].Auth; !reflect.DeepEqual(got, want) {
			t.Errorf("server %s auth = %+v, want %+v", name, got, want)
		}
	}
	if got, want := cfg.Endpoints["team"].Auth, (&TargetAuth{Scopes: []string{}}); !reflect.DeepEqual(got, want) {
		t.Errorf("endpoint team auth = %+v, want %+v", got, want)
	}
	if cfg.Endpoints["all"].Auth != nil {
		t.Errorf("endpoint all auth = %+v, want nil", cfg.Endpoints["all"].Auth)
	}
	// The default algorithms are a copy: one issuer's edits stay its own.
	cfg.Gateway.Auth.OAuth.Issuers[1].Algorithms[0] = "x"
	if AllowedAlgorithms[0] != "RS256" {
		t.Error("an issuer's default algorithms share AllowedAlgorithms")
	}
}

// TestParseAuthDefaults: a block with only keys protects everything.
func TestParseAuthDefaults(t *testing.T) {
	cfg, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x"}}, "gateway": {"auth": {"apiKeys": [{"name": "k", "sha256": "`+keyHash+`"}]}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Auth{APIKeys: []APIKey{{Name: "k", SHA256: keyHash}}, Required: true}
	if !reflect.DeepEqual(cfg.Gateway.Auth, want) {
		t.Errorf("auth = %+v, want %+v", cfg.Gateway.Auth, want)
	}
	if !reflect.DeepEqual(NewAuth(), &Auth{Required: true}) {
		t.Errorf("NewAuth() = %+v", NewAuth())
	}
	// No block, no auth; null is the default.
	for _, file := range []string{`{"mcpServers": {"a": {"command": "x"}}}`, `{"mcpServers": {"a": {"command": "x", "auth": null}}, "gateway": {"auth": null}}`} {
		cfg, err := Parse([]byte(file), nil)
		if err != nil || cfg.Gateway.Auth != nil || cfg.Servers["a"].Auth != nil {
			t.Errorf("%s: auth %+v, err %v", file, cfg.Gateway.Auth, err)
		}
	}
}

// TestParseAuthProblems checks that each mistake in the auth settings is
// reported at its path, naming the value (never a secret).
func TestParseAuthProblems(t *testing.T) {
	const servers = `"mcpServers": {"memory": {"command": "m"}}`
	withAuth := func(auth string) string {
		return `{` + servers + `, "gateway": {"auth": ` + auth + `}}`
	}
	issuer := func(fields string) string {
		return withAuth(`{"oauth": {"issuers": [{"issuer": "https://as.example.com"` + fields + `}]}}`)
	}
	key := func(fields string) string {
		return withAuth(`{"apiKeys": [{"name": "k"` + fields + `}]}`)
	}
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"not an object", withAuth(`true`), []string{`gateway.auth: must be an object`}},
		{"unknown key", withAuth(`{"apiKeys": [{"name": "k", "sha256": "` + keyHash + `"}], "realm": "x"}`),
			[]string{`gateway.auth.realm: unknown key`}},
		{"no credentials", withAuth(`{}`),
			[]string{`gateway.auth: configures no credentials: add "oauth" issuers or "apiKeys" (or remove "auth")`}},
		{"required type", withAuth(`{"apiKeys": [{"name": "k", "sha256": "` + keyHash + `"}], "required": "yes"}`),
			[]string{`gateway.auth.required: must be true or false`}},
		{"no issuers", withAuth(`{"oauth": {"scopes": ["mcp"]}}`),
			[]string{`gateway.auth.oauth.issuers: must list at least one issuer, like {"issuer": "https://auth.example.com"}`}},
		{"issuers type", withAuth(`{"oauth": {"issuers": "https://as"}}`),
			[]string{`gateway.auth.oauth.issuers: must be an array of objects like {"issuer": "https://auth.example.com"}`}},
		{"unknown issuer key", issuer(`, "jwks_uri": "https://as.example.com/jwks"`),
			[]string{`gateway.auth.oauth.issuers[0].jwks_uri: unknown key`}},
		{"issuer required", withAuth(`{"oauth": {"issuers": [{"jwksUrl": "https://as.example.com/jwks"}]}}`),
			[]string{`gateway.auth.oauth.issuers[0].issuer: required`}},
		{"issuer not a URL", withAuth(`{"oauth": {"issuers": [{"issuer": "auth.example.com"}]}}`),
			[]string{`gateway.auth.oauth.issuers[0].issuer: "auth.example.com" is not an https:// URL`}},
		{"issuer http", withAuth(`{"oauth": {"issuers": [{"issuer": "http://auth.example.com"}]}}`),
			[]string{`gateway.auth.oauth.issuers[0].issuer: "http://auth.example.com" is not https: tokens and secrets would cross the network in clear (http is only for a loopback host)`}},
		{"issuer with query", withAuth(`{"oauth": {"issuers": [{"issuer": "https://as.example.com/?tenant=1"}]}}`),
			[]string{`gateway.auth.oauth.issuers[0].issuer: "https://as.example.com/?tenant=1" has a user, query or fragment, which an issuer identifier cannot have`}},
		{"password redacted", withAuth(`{"oauth": {"issuers": [{"issuer": "http://u:hunter2@as.example.com"}]}}`),
			[]string{`gateway.auth.oauth.issuers[0].issuer: "http://u:xxxxx@as.example.com" is not https: tokens and secrets would cross the network in clear (http is only for a loopback host)`}},
		{"duplicate issuer", withAuth(`{"oauth": {"issuers": [{"issuer": "https://as.example.com"}, {"issuer": "https://as.example.com"}]}}`),
			[]string{`gateway.auth.oauth.issuers[1].issuer: "https://as.example.com" is already at gateway.auth.oauth.issuers[0]`}},
		{"bad jwksUrl", issuer(`, "jwksUrl": "ftp://as.example.com/jwks"`),
			[]string{`gateway.auth.oauth.issuers[0].jwksUrl: "ftp://as.example.com/jwks" is not an https:// URL`}},
		{"empty audience", issuer(`, "audiences": ["mcpgate", " "]`),
			[]string{`gateway.auth.oauth.issuers[0].audiences[1]: empty audience`}},
		{"alg none", issuer(`, "algorithms": ["RS256", "none"]`),
			[]string{`gateway.auth.oauth.issuers[0].algorithms[1]: "none" (unsigned tokens) is never accepted; use one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA`}},
		{"alg HS256", issuer(`, "algorithms": ["HS256"]`),
			[]string{`gateway.auth.oauth.issuers[0].algorithms[0]: "HS256" is a shared-secret algorithm: whoever can check a token could make one; use one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA`}},
		{"alg unknown", issuer(`, "algorithms": ["rs256"]`),
			[]string{`gateway.auth.oauth.issuers[0].algorithms[0]: "rs256" is not one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA`}},
		{"no algorithms", issuer(`, "algorithms": []`),
			[]string{`gateway.auth.oauth.issuers[0].algorithms: must list at least one algorithm (leave it out for all of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)`}},
		{"introspection url", issuer(`, "introspection": {"clientId": "gw", "clientSecret": "s"}`),
			[]string{`gateway.auth.oauth.issuers[0].introspection.url: required`}},
		{"introspection half credentials", issuer(`, "introspection": {"url": "https://as.example.com/i", "clientId": "gw"}`),
			[]string{`gateway.auth.oauth.issuers[0].introspection.clientSecret: required with "clientId"`}},
		{"introspection unknown key", issuer(`, "introspection": {"url": "https://as.example.com/i", "secret": "s"}`),
			[]string{`gateway.auth.oauth.issuers[0].introspection.secret: unknown key`}},
		{"introspection unset secret", issuer(`, "introspection": {"url": "https://as.example.com/i", "clientId": "gw", "clientSecret": "${NOPE}"}`),
			[]string{`gateway.auth.oauth.issuers[0].introspection.clientSecret: environment variable "NOPE" is not set`}},
		{"two introspections", withAuth(`{"oauth": {"issuers": [
			{"issuer": "https://a.example.com", "introspection": {"url": "https://a.example.com/i"}},
			{"issuer": "https://b.example.com", "introspection": {"url": "https://b.example.com/i"}}]}}`),
			[]string{`gateway.auth.oauth.issuers[1].introspection: only one issuer may use introspection (gateway.auth.oauth.issuers[0] does): an opaque token does not say which issuer made it, and would be sent to both`}},
		{"bad scope", withAuth(`{"oauth": {"issuers": [{"issuer": "https://as.example.com"}], "scopes": ["mcp tools", "", "mcp", "mcp"]}}`), []string{
			`gateway.auth.oauth.scopes[0]: "mcp tools" is not a scope (printable ASCII without space, '"' or '\')`,
			`gateway.auth.oauth.scopes[1]: empty scope`,
			`gateway.auth.oauth.scopes[3]: scope "mcp" is listed twice`,
		}},
		{"keys type", withAuth(`{"apiKeys": {"k": "x"}}`),
			[]string{`gateway.auth.apiKeys: must be an array of objects like {"name": "ci", "sha256": "..."}`}},
		{"key without secret", key(``),
			[]string{`gateway.auth.apiKeys[0]: needs the key: "sha256" (its hash), "keyFile" or "keyEnv"`}},
		{"key with two secrets", key(`, "sha256": "` + keyHash + `", "keyFile": "/k"`),
			[]string{`gateway.auth.apiKeys[0]: give only one of sha256, keyFile`}},
		{"key name required", withAuth(`{"apiKeys": [{"sha256": "` + keyHash + `"}]}`),
			[]string{`gateway.auth.apiKeys[0].name: required`}},
		{"key name invalid", withAuth(`{"apiKeys": [{"name": "ci bot", "sha256": "` + keyHash + `"}]}`),
			[]string{`gateway.auth.apiKeys[0].name: invalid key name "ci bot" (use only letters, digits, '.', '_' and '-')`}},
		{"duplicate key names", withAuth(`{"apiKeys": [{"name": "k", "sha256": "` + keyHash + `"}, {"name": "k", "keyFile": "/k"}]}`),
			[]string{`gateway.auth.apiKeys[1].name: key name "k" is already used at gateway.auth.apiKeys[0]`}},
		{"key hash not hex", key(`, "sha256": "my-secret-key"`),
			[]string{"gateway.auth.apiKeys[0].sha256: \"my-secret-key\" is not a SHA-256 in hex (64 hex digits, as `printf %s KEY | sha256sum` prints)"}},
		{"key hash of nothing", key(`, "sha256": "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"`),
			[]string{`gateway.auth.apiKeys[0].sha256: is the SHA-256 of the empty string`}},
		{"key env unset", key(`, "keyEnv": "NOPE"`),
			[]string{`gateway.auth.apiKeys[0].keyEnv: environment variable "NOPE" is not set`}},
		{"key env empty", key(`, "keyEnv": "EMPTY"`),
			[]string{`gateway.auth.apiKeys[0].keyEnv: environment variable "EMPTY" is empty`}},
		{"key env name", key(`, "keyEnv": "A=B"`),
			[]string{`gateway.auth.apiKeys[0].keyEnv: "A=B" is not an environment variable name`}},
		{"key unknown server", key(`, "sha256": "` + keyHash + `", "servers": ["memory", "github", "memory"]`), []string{
			`gateway.auth.apiKeys[0].servers[1]: unknown server "github" (not in mcpServers; "*" means every one)`,
			`gateway.auth.apiKeys[0].servers[2]: server "memory" is already listed at gateway.auth.apiKeys[0].servers[0]`,
		}},
		{"key unknown endpoint", key(`, "sha256": "` + keyHash + `", "endpoints": ["all", "team"]`),
			[]string{`gateway.auth.apiKeys[0].endpoints[1]: unknown endpoint "team" (not in gateway.endpoints; "*" means every one)`}},
		{"key unknown field", key(`, "sha256": "` + keyHash + `", "key": "plain"`),
			[]string{`gateway.auth.apiKeys[0].key: unknown key`}},
		{"public url", withAuth(`{"apiKeys": [{"name": "k", "sha256": "` + keyHash + `"}], "publicUrl": "gw.example.com"}`),
			[]string{`gateway.auth.publicUrl: "gw.example.com" is not an http:// or https:// URL (e.g. "https://gw.example.com")`}},
		{"public url query", withAuth(`{"apiKeys": [{"name": "k", "sha256": "` + keyHash + `"}], "publicUrl": "https://gw.example.com/?x=1"}`),
			[]string{`gateway.auth.publicUrl: "https://gw.example.com/?x=1" has a user, query or fragment: give only scheme, host and path`}},
		{"public url with host routing", `{` + servers + `, "gateway": {"hostRouting": {"domain": "mcp.example.com"}, "auth": {"apiKeys": [{"name": "k", "sha256": "` + keyHash + `"}], "publicUrl": "https://gw.example.com"}}}`,
			[]string{`gateway.auth.publicUrl: cannot be used with hostRouting (each server has a host of its own): set trustProxyHeaders behind a proxy instead`}},
		{"server auth type", `{"mcpServers": {"memory": {"command": "m", "auth": "none"}}}`,
			[]string{`mcpServers.memory.auth: must be true, false or an object like {"scopes": ["mcp"]}`}},
		{"server auth unknown key", `{"mcpServers": {"memory": {"command": "m", "auth": {"scope": "mcp"}}}, "gateway": {"auth": {"apiKeys": [{"name": "k", "sha256": "` + keyHash + `"}]}}}`,
			[]string{`mcpServers.memory.auth.scope: unknown key`}},
		{"server auth scopes", `{"mcpServers": {"memory": {"command": "m", "auth": {"scopes": ["a\"b"]}}}, "gateway": {"auth": {"apiKeys": [{"name": "k", "sha256": "` + keyHash + `"}]}}}`,
			[]string{`mcpServers.memory.auth.scopes[0]: "a\"b" is not a scope (printable ASCII without space, '"' or '\')`}},
		{"server auth without block", `{"mcpServers": {"memory": {"command": "m", "auth": true}, "open": {"command": "o", "auth": false}}}`,
			[]string{`mcpServers.memory.auth: no credentials are configured to check: add "gateway": {"auth": {...}}`}},
		{"endpoint auth without block", `{` + servers + `, "gateway": {"endpoints": {"e": {"servers": ["memory"], "auth": {"scopes": ["x"]}}}}}`,
			[]string{`gateway.endpoints.e.auth: no credentials are configured to check: add "gateway": {"auth": {...}}`}},
	}
	env := fakeEnv(map[string]string{"EMPTY": " "})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.file), env)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %+v, %v; want problems %q", cfg, err, tt.want)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems\n %s\nwant\n %s", strings.Join(got, "\n "), strings.Join(tt.want, "\n "))
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("a secret is in the problems: %v", err)
			}
		})
	}
}

// TestValidateBuiltAuth: a Config built in code gets the same checks,
// whatever the decoder would have refused earlier.
func TestValidateBuiltAuth(t *testing.T) {
	cfg := Default()
	s := cfg.Gateway.NewServer("memory")
	s.Command = "m"
	cfg.Servers["memory"] = s
	cfg.Gateway.Auth = NewAuth()
	cfg.Gateway.Auth.OAuth = &OAuth{Issuers: []Issuer{{Issuer: "https://as.example.com", Algorithms: []string{"HS256"}}}}
	cfg.Gateway.Auth.APIKeys = []APIKey{{Name: "k", SHA256: keyHash, Servers: []string{"nope"}}}
	var ps Problems
	if err := cfg.Validate(); !errors.As(err, &ps) || len(ps) != 2 ||
		ps[0].Path != "gateway.auth.apiKeys[0].servers[0]" || ps[1].Path != "gateway.auth.oauth.issuers[0].algorithms[0]" {
		t.Fatalf("Validate() = %v", err)
	}
	cfg.Gateway.Auth.OAuth.Issuers[0].Algorithms = []string{"ES256"}
	cfg.Gateway.Auth.APIKeys[0].Servers = []string{"memory"}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
}
