package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// hashOf is a key's SHA-256 in hex, as the config stores it.
func hashOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

const (
	ciKey   = "ci-key-0123456789abcdef"
	fileKey = "file-key-0123456789abcdef"
	envKey  = "env-key-0123456789abcdef+/=="
)

// TestMissingTokenChallenge: a protected target without credentials gets
// 401 with a challenge naming its metadata document by its absolute URL
// (MCP clients ignore a relative one) and the scopes to ask for, and no
// error code (RFC 6750 section 3.1); a scheme other than Bearer counts
// as no credentials.
func TestMissingTokenChallenge(t *testing.T) {
	g := newGate(t, oauthConfig(Issuer{Issuer: "https://as.example.com"}), newClock())
	want := `Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/servers/memory/mcp", scope="mcp"`
	for _, authz := range []string{"", "Basic YWxpY2U6c2VjcmV0", "Bearer", "Bearer   ", "  "} {
		d := g.Authenticate(request(authz), memory)
		wantRefused(t, d, http.StatusUnauthorized)
		if d.Challenge != want || d.Reason == "" {
			t.Errorf("%q: challenge %q (reason %q), want %q", authz, d.Challenge, d.Reason, want)
		}
	}
	// Without scopes, no scope parameter.
	g = newGate(t, Config{Issuers: []Issuer{{Issuer: "https://as.example.com"}}, Required: true}, newClock())
	if d := g.Authenticate(request(""), team); d.Challenge != `Bearer resource_metadata="`+team.Metadata+`"` {
		t.Errorf("challenge %q", d.Challenge)
	}
}

// TestMalformedAuthorization: two Authorization headers, or a Bearer
// token with characters no token has, are 400 invalid_request.
func TestMalformedAuthorization(t *testing.T) {
	g := newGate(t, Config{APIKeys: []APIKey{{Name: "ci", SHA256: hashOf(ciKey)}}, Required: true}, newClock())
	r := bearer(ciKey)
	r.Header.Add("Authorization", "Bearer "+ciKey)
	d := g.Authenticate(r, memory)
	wantRefused(t, d, http.StatusBadRequest, "more than one Authorization header")
	if !strings.HasPrefix(d.Challenge, `Bearer error="invalid_request", resource_metadata="`) {
		t.Errorf("challenge %q", d.Challenge)
	}
	wantRefused(t, g.Authenticate(bearer("a b"), memory), http.StatusBadRequest, "malformed bearer token")
	wantRefused(t, g.Authenticate(bearer(strings.Repeat("a", maxTokenLength+1)), memory), http.StatusBadRequest, "malformed")
}

// TestAPIKeys: keys by hash, file and environment variable; a wrong key is
// 401 invalid_token; a key used for a target it is not given is 403
// naming the key and the target; a key's scopes are checked like a
// token's.
func TestAPIKeys(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("\n  "+fileKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		APIKeys: []APIKey{
			{Name: "ci", SHA256: strings.ToUpper(hashOf(ciKey)), Servers: []string{"memory"}},
			{Name: "file", KeyFile: keyFile, Endpoints: []string{"team"}},
			{Name: "env", KeyEnv: "MCP_KEY", Servers: []string{"*"}, Endpoints: []string{"*"}, Scopes: []string{"mcp", "admin"}},
			{Name: "all", SHA256: hashOf("all-key-0123456789abcdef")},
		},
		Scopes:   []string{"mcp"},
		Required: true,
		Servers:  map[string]TargetConfig{"github": {Scopes: []string{"admin"}}},
	}
	env := func(name string) (string, bool) {
		if name == "MCP_KEY" {
			return " " + envKey + "\n", true
		}
		return "", false
	}
	g := newGate(t, cfg, newClock(), func(o *Options) { o.LookupEnv = env })

	p := wantOK(t, g.Authenticate(bearer(ciKey), memory), "ci")
	if p.Kind != KindKey || !slices.Equal(p.Scopes, []string{"mcp"}) || p.Claims != nil || p.Issuer != "" {
		t.Errorf("principal %+v", p)
	}
	wantOK(t, g.Authenticate(request("bearer "+ciKey), memory), "ci") // the scheme in any case
	wantOK(t, g.Authenticate(bearer(fileKey), team), "file")
	wantOK(t, g.Authenticate(bearer(envKey), github), "env")
	wantOK(t, g.Authenticate(bearer(envKey), team), "env")

	// Keys for other targets: 403, naming what failed.
	d := g.Authenticate(bearer(ciKey), team)
	wantRefused(t, d, http.StatusForbidden, `API key "ci" may not use endpoint "team"`)
	if !strings.HasPrefix(d.Challenge, `Bearer error="insufficient_scope", resource_metadata="`+team.Metadata+`", scope="mcp"`) {
		t.Errorf("challenge %q", d.Challenge)
	}
	wantRefused(t, g.Authenticate(bearer(fileKey), memory), http.StatusForbidden, `API key "file" may not use server "memory"`)
	// A key without the target's scope.
	wantRefused(t, g.Authenticate(bearer("all-key-0123456789abcdef"), github), http.StatusForbidden, `insufficient scope: API key "all" lacks admin`)
	wantOK(t, g.Authenticate(bearer("all-key-0123456789abcdef"), team), "all")

	// Wrong keys: 401, and nothing of the key in the answer.
	for _, wrong := range []string{"not-a-key-0123456789", strings.ToUpper(ciKey), ciKey + "x", hashOf(ciKey)} {
		d := g.Authenticate(bearer(wrong), memory)
		wantRefused(t, d, http.StatusUnauthorized, "invalid token: not an API key of this gateway")
		if !strings.HasPrefix(d.Challenge, `Bearer error="invalid_token", resource_metadata="`) || strings.Contains(d.Challenge+d.Reason, wrong) {
			t.Errorf("%q: challenge %q, reason %q", wrong, d.Challenge, d.Reason)
		}
	}
}

// TestNewRefuses: keys that cannot be read, are too short or cannot be
// sent, and settings the config package refuses too, fail New, naming
// the key but never showing it.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	short, spaced := write("short", "abc123\n"), write("spaced", "correct horse battery staple")
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"EMPTY": "  ", "SAME": ciKey}[name]
		return v, ok
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing file", Config{APIKeys: []APIKey{{Name: "f", KeyFile: filepath.Join(dir, "nope")}}},
			`API key "f": keyFile: open ` + filepath.Join(dir, "nope") + `: no such file or directory`},
		{"short key", Config{APIKeys: []APIKey{{Name: "f", KeyFile: short}}},
			`API key "f": the key in the file ` + short + ` has 6 characters: use at least 16`},
		{"unsendable key", Config{APIKeys: []APIKey{{Name: "f", KeyFile: spaced}}},
			`API key "f": the key in the file ` + spaced + ` has characters a bearer token cannot carry`},
		{"unset variable", Config{APIKeys: []APIKey{{Name: "e", KeyEnv: "NOPE"}}},
			`API key "e": keyEnv: environment variable "NOPE" is not set`},
		{"empty variable", Config{APIKeys: []APIKey{{Name: "e", KeyEnv: "EMPTY"}}},
			`API key "e": the environment variable EMPTY is empty`},
		{"two sources", Config{APIKeys: []APIKey{{Name: "e", KeyEnv: "SAME", SHA256: hashOf(ciKey)}}},
			`API key "e": give exactly one of sha256, keyFile, keyEnv`},
		{"bad hash", Config{APIKeys: []APIKey{{Name: "h", SHA256: "abc"}}}, `API key "h": sha256 is not 64 hex digits`},
		{"same key twice", Config{APIKeys: []APIKey{{Name: "a", SHA256: hashOf(ciKey)}, {Name: "b", KeyEnv: "SAME"}}},
			`API keys "a" and "b" are the same key`},
		{"same name twice", Config{APIKeys: []APIKey{{Name: "a", SHA256: hashOf(ciKey)}, {Name: "a", SHA256: hashOf(envKey)}}},
			`API key name "a" is used twice`},
		{"HS256", Config{Issuers: []Issuer{{Issuer: "https://as", Algorithms: []string{"HS256"}}}},
			`algorithm "HS256" is not one of RS256`},
		{"none", Config{Issuers: []Issuer{{Issuer: "https://as", Algorithms: []string{"RS256", "none"}}}},
			`algorithm "none" is not one of`},
		{"no algorithms", Config{Issuers: []Issuer{{Issuer: "https://as", Algorithms: []string{}}}}, "no algorithm accepted"},
		{"two introspections", Config{Issuers: []Issuer{
			{Issuer: "https://a", Introspection: &Introspection{URL: "https://a/i"}},
			{Issuer: "https://b", Introspection: &Introspection{URL: "https://b/i"}}}},
			`issuers "https://a" and "https://b" both have introspection`},
		{"issuer twice", Config{Issuers: []Issuer{{Issuer: "https://a"}, {Issuer: "https://a"}}}, `issuer "https://a" is listed twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, Options{LookupEnv: env})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "abc123") || strings.Contains(err.Error(), "horse") || strings.Contains(err.Error(), ciKey) {
				t.Errorf("the key is in the error: %v", err)
			}
		})
	}
	// The file is read with the ReadFile given.
	_, err := New(Config{APIKeys: []APIKey{{Name: "f", KeyFile: "/k"}}}, Options{ReadFile: func(string) ([]byte, error) { return nil, fs.ErrPermission }})
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("New: %v", err)
	}
}

// TestOpenTargets: with required false only targets whose "auth" says so
// are protected; "auth": false leaves a target open. An open target
// passes requests without credentials as nobody, checks credentials that
// come (a bad one is refused, without a resource_metadata to follow), and
// has no metadata document.
func TestOpenTargets(t *testing.T) {
	keys := []APIKey{{Name: "ci", SHA256: hashOf(ciKey), Servers: []string{"memory"}}}
	cfg := Config{APIKeys: keys, Required: false, Servers: map[string]TargetConfig{"github": {}}}
	g := newGate(t, cfg, newClock())
	if d := g.Authenticate(request(""), memory); !reflect.DeepEqual(d, Decision{}) {
		t.Errorf("open target without credentials: %+v", d)
	}
	if d := g.Authenticate(request("Basic eDp5"), memory); !reflect.DeepEqual(d, Decision{}) {
		t.Errorf("open target with Basic credentials: %+v", d)
	}
	wantOK(t, g.Authenticate(bearer(ciKey), memory), "ci")
	d := g.Authenticate(bearer("wrong-0123456789abcdef"), memory)
	wantRefused(t, d, http.StatusUnauthorized, "not an API key")
	if d.Challenge != `Bearer error="invalid_token", error_description="invalid token: not an API key of this gateway"` {
		t.Errorf("challenge %q", d.Challenge)
	}
	if doc, ok := g.Metadata(memory); ok || doc != nil {
		t.Errorf("Metadata(open) = %s, %v", doc, ok)
	}
	// "auth": true protects github even so.
	wantRefused(t, g.Authenticate(request(""), github), http.StatusUnauthorized)
	if _, ok := g.Metadata(github); !ok {
		t.Error("Metadata(github) not protected")
	}

	// Required, with one server open.
	cfg = Config{APIKeys: keys, Required: true, Servers: map[string]TargetConfig{"github": {Off: true}}}
	g = newGate(t, cfg, newClock())
	if d := g.Authenticate(request(""), github); !reflect.DeepEqual(d, Decision{}) {
		t.Errorf("open github: %+v", d)
	}
	wantRefused(t, g.Authenticate(request(""), memory), http.StatusUnauthorized)
	wantRefused(t, g.Authenticate(request(""), team), http.StatusUnauthorized)
}

// TestMetadata: the RFC 9728 document of a target: its resource URL, the
// issuers, its scopes, header as the only bearer method, the name.
func TestMetadata(t *testing.T) {
	cfg := Config{
		Issuers:      []Issuer{{Issuer: "https://a.example.com/realms/x"}, {Issuer: "https://b.example.com"}},
		Scopes:       []string{"mcp"},
		ResourceName: "Team tools & more",
		Required:     true,
		Endpoints:    map[string]TargetConfig{"team": {Scopes: []string{}}},
	}
	g := newGate(t, cfg, newClock())
	doc, ok := g.Metadata(memory)
	want := `{"resource":"https://gw.example.com/servers/memory/mcp","authorization_servers":["https://a.example.com/realms/x","https://b.example.com"],"scopes_supported":["mcp"],"bearer_methods_supported":["header"],"resource_name":"Team tools & more"}` + "\n"
	if !ok || string(doc) != want {
		t.Errorf("Metadata(memory) = %s, %v\nwant %s", doc, ok, want)
	}
	doc, _ = g.Metadata(team)
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil || m["resource"] != team.Resource || m["scopes_supported"] != nil {
		t.Errorf("Metadata(team) = %s", doc)
	}
	// API keys only: no authorization server to name.
	g = newGate(t, Config{APIKeys: []APIKey{{Name: "ci", SHA256: hashOf(ciKey)}}, Required: true}, newClock())
	doc, ok = g.Metadata(memory)
	if want := `{"resource":"https://gw.example.com/servers/memory/mcp","bearer_methods_supported":["header"]}` + "\n"; !ok || string(doc) != want {
		t.Errorf("Metadata(keys only) = %s, %v", doc, ok)
	}
}

// TestChallengeQuoting: a reason with quotes, backslashes or control
// characters (a token's claims are its sender's) cannot break out of the
// header parameter.
func TestChallengeQuoting(t *testing.T) {
	c := challenge("invalid_token", "https://gw/x", []string{"a"}, "issuer \"x\\\r\nSet-Cookie: y\" é"+strings.Repeat("z", 400))
	if strings.ContainsAny(c, "\r\n\\") || strings.Count(c, `"`) != 8 || len(c) > 400 {
		t.Errorf("challenge %q", c)
	}
}
