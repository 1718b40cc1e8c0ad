package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestParseAuthServer: the block decodes every key; what it leaves out
// takes its default, some from the rest of gateway.auth.
func TestParseAuthServer(t *testing.T) {
	const hash = "$argon2id$v=19$m=65536,t=1,p=4$c2FsdA$aGFzaA"
	cfg, err := Parse([]byte(`{"mcpServers": {"memory": {"command": "m"}}, "gateway": {"auth": {"server": {
		"issuer": "https://gw.example.com/base", "users": [{"name": "me@home", "passwordHash": "${H}"}],
		"redirectUris": ["https://*.example.com:*/cb"], "loopbackRedirects": false, "registration": false,
		"clientMetadataDocuments": false, "scopes": ["mcp", "files"], "accessTokenTtl": "5m",
		"refreshTokenTtl": "24h", "stateFile": "/var/lib/mcpgate/auth.json", "passkeys": false}}}}`), fakeEnv(map[string]string{"H": hash}))
	if err != nil {
		t.Fatal(err)
	}
	want := &AuthServer{Issuer: "https://gw.example.com/base", Users: []AuthUser{{Name: "me@home", PasswordHash: hash}},
		RedirectURIs: []string{"https://*.example.com:*/cb"}, Scopes: []string{"mcp", "files"},
		AccessTokenTTL: 5 * time.Minute, RefreshTokenTTL: 24 * time.Hour, StateFile: "/var/lib/mcpgate/auth.json"}
	if got := cfg.Gateway.Auth.Server; !reflect.DeepEqual(got, want) {
		t.Errorf("server\n %+v\nwant\n %+v", got, want)
	}

	for _, tc := range []struct {
		name, auth string
		want       *AuthServer
	}{
		{"true, from publicUrl", `{"publicUrl": "https://gw.example.com", "server": true}`,
			&AuthServer{Issuer: "https://gw.example.com", SignInCode: true, RedirectURIs: DefaultRedirectURIs, LoopbackRedirects: true,
				Registration: true, ClientMetadataDocuments: true, Scopes: []string{"mcp"}, AccessTokenTTL: 10 * time.Minute,
				RefreshTokenTTL: 30 * 24 * time.Hour, StateFile: DefaultStateFile, Passkeys: true}},
		{"scopes of oauth, users without code", `{"oauth": {"issuers": [{"issuer": "https://as.example.com"}], "scopes": ["tools"]},
			"server": {"issuer": "http://127.0.0.1:8080", "users": [{"name": "me", "passwordHash": "$2b$10$abc"}]}}`,
			&AuthServer{Issuer: "http://127.0.0.1:8080", Users: []AuthUser{{Name: "me", PasswordHash: "$2b$10$abc"}}, RedirectURIs: DefaultRedirectURIs,
				LoopbackRedirects: true, Registration: true, ClientMetadataDocuments: true, Scopes: []string{"tools"},
				AccessTokenTTL: 10 * time.Minute, RefreshTokenTTL: 30 * 24 * time.Hour, StateFile: DefaultStateFile, Passkeys: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(`{"mcpServers": {"memory": {"command": "m"}}, "gateway": {"auth": `+tc.auth+`}}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Gateway.Auth.Server; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("server\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
	if cfg, err := Parse([]byte(`{"mcpServers": {"memory": {"command": "m"}}, "gateway": {"auth": {"apiKeys": [{"name": "k", "sha256": "`+keyHash+`"}], "server": false}}}`), nil); err != nil || cfg.Gateway.Auth.Server != nil {
		t.Errorf(`"server": false: %+v, %v; want none`, cfg, err)
	}
}

// TestParseAuthServerProblems: every bad value of the block is refused at
// its key, naming the value (never a password).
func TestParseAuthServerProblems(t *testing.T) {
	withServer := func(fields string) string {
		return `{"mcpServers": {"memory": {"command": "m"}}, "gateway": {"auth": {"server": {"issuer": "https://gw.example.com"` + fields + `}}}}`
	}
	withIssuer := func(issuer string) string {
		return `{"mcpServers": {"memory": {"command": "m"}}, "gateway": {"auth": {"server": {"issuer": ` + issuer + `}}}}`
	}
	const p = "gateway.auth.server."
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"not an object", `{"mcpServers": {"memory": {"command": "m"}}, "gateway": {"auth": {"server": "on"}}}`,
			[]string{`gateway.auth.server: must be true or an object`}},
		{"unknown key", withServer(`, "clients": []`), []string{p + `clients: unknown key`}},
		{"no issuer", `{"mcpServers": {"memory": {"command": "m"}}, "gateway": {"auth": {"server": {}}}}`,
			[]string{p + `issuer: required (or set gateway.auth.publicUrl): the URL clients reach the gateway at, like "https://gw.example.com"`}},
		{"issuer http", withIssuer(`"http://gw.example.com"`),
			[]string{p + `issuer: "http://gw.example.com" is not https: tokens and secrets would cross the network in clear (http is only for a loopback host)`}},
		{"issuer query", withIssuer(`"https://gw.example.com/?a=1"`),
			[]string{p + `issuer: "https://gw.example.com/?a=1" has a user, query or fragment, which an issuer identifier cannot have`}},
		{"issuer type", withIssuer(`1`), []string{p + `issuer: must be a string`}},
		{"users type", withServer(`, "users": {"me": "x"}`),
			[]string{p + `users: must be an array of objects like {"name": "me", "passwordHash": "$argon2id$..."}`}},
		{"user unknown key", withServer(`, "users": [{"name": "me", "password": "hunter2"}]`), []string{p + `users[0].password: unknown key`}},
		{"user name", withServer(`, "users": [{"passwordHash": "$2b$x"}, {"name": "a b"}, {"name": "me"}, {"name": "me"}]`), []string{
			p + `users[0].name: required`,
			p + `users[1].name: invalid user name "a b" (use only letters, digits, '.', '_', '-' and '@')`,
			p + `users[3].name: user "me" is already at gateway.auth.server.users[2]`,
		}},
		{"password not a hash", withServer(`, "users": [{"name": "me", "passwordHash": "hunter2"}]`),
			[]string{p + "users[0].passwordHash: is not an argon2id or bcrypt hash (as `mcpgate passwd` prints: \"$argon2id$...\" or \"$2b$...\")"}},
		{"nobody can sign in", withServer(`, "signInCode": false`),
			[]string{p + `signInCode: false with no users: nobody could sign in (add users, or leave signInCode on for the first sign-in)`}},
		{"signInCode type", withServer(`, "signInCode": "yes"`), []string{p + `signInCode: must be true or false`}},
		{"redirect URIs", withServer(`, "redirectUris": ["claude.ai/cb", "http://evil.example/cb", "https://u@h.example.com/cb", "https://h.example.com/cb#x",
			"https://a*.example.com/cb", "https://*.com/cb", "https://h.example.com:8*/cb", "https://h.example.com/*", "https://*.example.com:*/cb"]`), []string{
			p + `redirectUris[0]: "claude.ai/cb" is not an absolute https:// URL`,
			p + `redirectUris[1]: "http://evil.example/cb" is not https: the code would cross the network in clear (http is only for a loopback host)`,
			p + `redirectUris[2]: "https://u@h.example.com/cb" has a user or fragment, which a redirect URI cannot have (RFC 6749 3.1.2)`,
			p + `redirectUris[3]: "https://h.example.com/cb#x" has a user or fragment, which a redirect URI cannot have (RFC 6749 3.1.2)`,
			p + `redirectUris[4]: "https://a*.example.com/cb": "*" must be a whole host label ("https://*.example.com/cb")`,
			p + `redirectUris[5]: "https://*.com/cb": "*" may not stand for the registrable domain, only for a label under it`,
			p + `redirectUris[6]: "https://h.example.com:8*/cb": "*" must be the whole port`,
			p + `redirectUris[7]: "https://h.example.com/*": "*" may stand only for a host label or the port, not in the path or query`,
		}},
		{"no scopes", withServer(`, "scopes": []`), []string{p + `scopes: must list at least one scope, like ["mcp"]`}},
		{"bad scope", withServer(`, "scopes": ["a b", "mcp", "mcp"]`), []string{
			p + `scopes[0]: "a b" is not a scope (printable ASCII without space, '"' or '\')`,
			p + `scopes[2]: scope "mcp" is listed twice`,
		}},
		{"access ttl", withServer(`, "accessTokenTtl": "0s"`), []string{p + `accessTokenTtl: must be positive (e.g. "10m")`}},
		{"access ttl long", withServer(`, "accessTokenTtl": "48h"`),
			[]string{p + `accessTokenTtl: 48h0m0s is more than 24h0m0s: access tokens should be short-lived (refresh tokens last longer)`}},
		{"access ttl not a duration", withServer(`, "accessTokenTtl": 600`), []string{p + `accessTokenTtl: 600 is not a duration (use e.g. "600s")`}},
		{"refresh ttl", withServer(`, "refreshTokenTtl": "-1h"`), []string{p + `refreshTokenTtl: must be positive (e.g. "720h")`}},
		{"refresh shorter", withServer(`, "accessTokenTtl": "1h", "refreshTokenTtl": "30m"`),
			[]string{p + `refreshTokenTtl: 30m0s is shorter than accessTokenTtl (1h0m0s)`}},
		{"state file", withServer(`, "stateFile": " "`), []string{p + `stateFile: empty file name`}},
		{"passkeys type", withServer(`, "passkeys": 1`), []string{p + `passkeys: must be true or false`}},
		{"also an oauth issuer", `{"mcpServers": {"memory": {"command": "m"}}, "gateway": {"auth": {"oauth": {"issuers": [{"issuer": "https://gw.example.com"}]}, "server": {"issuer": "https://gw.example.com"}}}}`,
			[]string{p + `issuer: "https://gw.example.com" is also at gateway.auth.oauth.issuers[0]: the gateway trusts its own server without listing it`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.file), nil)
			checkProblems(t, err, tt.want, "hunter2")
		})
	}
}

// TestAuthServerStateFileNextToConfig: a relative state file is the
// config file's neighbour, wherever the gateway starts.
func TestAuthServerStateFileNextToConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcpgate.json")
	for _, tc := range []struct{ server, want string }{
		{`true`, filepath.Join(dir, DefaultStateFile)},
		{`{"stateFile": "state/auth.json"}`, filepath.Join(dir, "state", "auth.json")},
		{`{"stateFile": "/var/lib/auth.json"}`, "/var/lib/auth.json"},
	} {
		data := `{"mcpServers": {"m": {"command": "m"}}, "gateway": {"auth": {"publicUrl": "https://gw.example.com", "server": ` + tc.server + `}}}`
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Gateway.Auth.Server.StateFile; got != tc.want {
			t.Errorf("%s: state file %q, want %q", tc.server, got, tc.want)
		}
	}
}
