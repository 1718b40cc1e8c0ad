package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// secretValue is in every secrets file of these tests: no problem, error or
// String may contain it.
const secretValue = "ghp_TOPSECRET"

// writeSecrets writes a secrets file and returns its path, JSON-quoted for
// a config file.
func writeSecrets(t *testing.T, content string) (path, quoted string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "secrets.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	q, _ := json.Marshal(path)
	return path, string(q)
}

func TestPrincipalHeadersParse(t *testing.T) {
	path, q := writeSecrets(t, `{"alice": {"github_token": "`+secretValue+`"}, "bob": {}}`)
	file := `{"gateway": {"secretsFile": ` + q + `},
	  "mcpServers": {"github": {"type": "http", "url": "https://api.example.com/mcp",
	    "headers": {"authorization": "Bearer static", "X-Static": "1"},
	    "principalHeaders": {"Authorization": "Bearer {{secret.github_token}}",
	      "X-User": "{{ principal }}/{{claim.login}}"}}}}`
	cfg, err := Parse([]byte(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Gateway.SecretsFile != path || cfg.Gateway.Secrets == nil {
		t.Fatalf("secrets not loaded: %v", cfg.Gateway.Secrets)
	}
	s := cfg.Servers["github"]
	if s.Secrets != cfg.Gateway.Secrets {
		t.Errorf("server's Secrets not linked")
	}
	for _, text := range []string{fmt.Sprint(cfg.Gateway.Secrets), fmt.Sprintf("%#v %+v", cfg.Gateway, *s)} {
		if strings.Contains(text, secretValue) {
			t.Errorf("formatted config shows a secret: %s", text)
		}
	}
	if got := s.PrincipalHeaders["Authorization"].String(); got != "…{{secret.github_token}}" {
		t.Errorf("template String = %q", got)
	}

	h, err := s.UpstreamHeaders("alice", map[string]any{"login": "al"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Authorization": "Bearer " + secretValue, "X-Static": "1", "X-User": "alice/al"}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("UpstreamHeaders = %v, want %v", h, want)
	}

	refusals := []struct {
		principal string
		claims    map[string]any
		want      string
	}{
		{"", nil, `mcpgate: server "github" needs an authenticated principal (its header "Authorization" is per principal)`},
		{"bob", nil, `mcpgate: server "github" needs secret "github_token" for principal "bob" (header "Authorization", gateway.secretsFile)`},
		{"carol", nil, `mcpgate: server "github" needs secret "github_token" for principal "carol" (header "Authorization", gateway.secretsFile)`},
		{"alice", nil, `mcpgate: server "github" needs string claim "login" in the token of principal "alice" (header "X-User")`},
		{"alice", map[string]any{"login": 7.0}, `mcpgate: server "github" needs string claim "login" in the token of principal "alice" (header "X-User")`},
		{"alice", map[string]any{"login": "a\r\nX-Evil: 1"}, `mcpgate: server "github": header "X-User" for principal "alice" would contain a control character`},
	}
	for _, r := range refusals {
		_, err := s.UpstreamHeaders(r.principal, r.claims)
		if err == nil || err.Error() != r.want || !errors.Is(err, ErrNoCredential) {
			t.Errorf("UpstreamHeaders(%q, %v) = %v,\n want %s", r.principal, r.claims, err, r.want)
		}
	}
}

func TestPrincipalHeadersProblems(t *testing.T) {
	_, good := writeSecrets(t, `{"alice": {"t": "`+secretValue+`"}}`)
	server := func(typ, ph string) string {
		return `{"mcpServers": {"gh": {"type": "` + typ + `", "url": "https://x.example/mcp", "command": "", "principalHeaders": ` + ph + `}}, "gateway": {"secretsFile": ` + good + `}}`
	}
	tests := []struct {
		name, file string
		want       []string
	}{
		{"unknown placeholder", server("http", `{"Authorization": "Bearer {{foo}}"}`),
			[]string{`mcpServers.gh.principalHeaders.Authorization: unknown placeholder {{foo}} (write {{principal}}, {{secret.NAME}} or {{claim.NAME}})`}},
		{"unknown kind", server("sse", `{"X": "{{env.HOME}}"}`),
			[]string{`mcpServers.gh.principalHeaders.X: unknown placeholder {{env.HOME}} (write {{principal}}, {{secret.NAME}} or {{claim.NAME}})`}},
		{"unterminated", server("http", `{"Authorization": "Bearer {{secret.t"}`),
			[]string{`mcpServers.gh.principalHeaders.Authorization: unterminated "{{" (write {{principal}}, {{secret.NAME}} or {{claim.NAME}})`}},
		{"no name", server("http", `{"Authorization": "{{secret.}}"}`),
			[]string{`mcpServers.gh.principalHeaders.Authorization: placeholder {{secret.}} names no secret (write {{principal}}, {{secret.NAME}} or {{claim.NAME}})`}},
		{"bad name", server("http", `{"Authorization": "{{claim.a b}}"}`),
			[]string{`mcpServers.gh.principalHeaders.Authorization: placeholder {{claim.a b}}: invalid claim name`}},
		{"not a string", server("http", `{"Authorization": 3}`),
			[]string{`mcpServers.gh.principalHeaders.Authorization: must be a string`}},
		{"not an object", server("http", `["Authorization"]`),
			[]string{`mcpServers.gh.principalHeaders: must be an object of header name -> template`}},
		{"transport header", server("http", `{"mcp-session-id": "{{principal}}"}`),
			[]string{`mcpServers.gh.principalHeaders.mcp-session-id: set by the gateway's transport; remove it`}},
		{"bad header name", server("http", `{"X Y": "{{principal}}"}`),
			[]string{`mcpServers.gh.principalHeaders.X Y: invalid header name`}},
		{"control character", server("http", `{"X": "a\r\nb{{principal}}"}`),
			[]string{`mcpServers.gh.principalHeaders.X: value contains a control character (CR, LF, NUL...)`}},
		{"stdio", `{"mcpServers": {"gh": {"command": "gh", "principalHeaders": {"X": "{{principal}}"}}}}`,
			[]string{`mcpServers.gh.principalHeaders: only used by "http" and "sse" servers`}},
		{"secret without file", `{"mcpServers": {"gh": {"url": "https://x.example/mcp", "principalHeaders": {"Authorization": "{{secret.t}}"}}}}`,
			[]string{`mcpServers.gh.principalHeaders.Authorization: uses {{secret.t}} but gateway.secretsFile is not set`}},
		{"good", server("http", `{"Authorization": "token {{secret.t}}", "X-Who": "{{principal}}", "X-Login": "{{claim.https://ex/login}}"}`), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.file), nil)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil || err.Error() != strings.Join(tt.want, "\n") {
				t.Errorf("Parse error:\n  %v\nwant:\n  %s", err, strings.Join(tt.want, "\n  "))
			}
		})
	}
}

func TestSecretsFileProblems(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.json")
	tests := []struct {
		name, content string
		want          string // after `gateway.secretsFile: "PATH"`
	}{
		{"missing", "", `cannot read "PATH": no such file or directory`},
		{"syntax", "{\"alice\": {\"t\": \"" + secretValue + "\",}}", `"PATH": invalid JSON near line 1, column 33`},
		{"array", `["` + secretValue + `"]`, `"PATH": must be a JSON object {"PRINCIPAL": {"SECRET_NAME": "value", ...}, ...}`},
		{"principal not an object", `{"alice": "` + secretValue + `"}`, `"PATH": principal "alice": must be an object of secret name -> string`},
		{"value not a string", `{"alice": {"t": 7, "u": "` + secretValue + `"}}`, `"PATH": secret "t" of principal "alice": must be a string`},
		{"duplicate principal", `{"alice": {}, "alice": {}}`, `"PATH": principal "alice": duplicate key`},
		{"duplicate secret", `{"alice": {"t": "a", "t": "` + secretValue + `"}}`, `"PATH": secret "t" of principal "alice": duplicate key`},
		{"control character", `{"alice": {"t": "` + secretValue + `\r\nX: y"}}`, `"PATH": secret "t" of principal "alice": contains a control character (CR, LF, NUL...)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := missing
			if tt.name != "missing" {
				path = filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
				if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			q, _ := json.Marshal(path)
			file := `{"mcpServers": {"a": {"command": "x"}}, "gateway": {"secretsFile": ` + string(q) + `}}`
			_, err := Parse([]byte(file), nil)
			want := `gateway.secretsFile: ` + strings.ReplaceAll(tt.want, "PATH", path)
			if err == nil || err.Error() != want {
				t.Errorf("Parse error:\n  %v\nwant:\n  %s", err, want)
			}
			if err != nil && strings.Contains(err.Error(), secretValue[4:]) {
				t.Errorf("the problem shows a secret: %v", err)
			}
		})
	}
}

func TestParseTemplateKeepsLiterals(t *testing.T) {
	tm, err := ParseTemplate("a }} {{principal}}{{secret.x}}-{{claim.y}}")
	if err != nil {
		t.Fatal(err)
	}
	got, cerr := tm.expand("p", map[string]any{"y": "Y"}, NewSecrets("f", map[string]map[string]string{"p": {"x": "X"}}))
	if cerr != nil || got != "a }} pX-Y" {
		t.Errorf("expand = %q, %v", got, cerr)
	}
	if names := tm.Secrets(); !reflect.DeepEqual(names, []string{"x"}) {
		t.Errorf("Secrets = %v", names)
	}
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"Bearer {{secret.t}}", "{{principal}}", "{{", "}}{{claim.a}}", "{{ {{x}} }}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTemplate(s)
		if err != nil {
			return
		}
		got, cerr := tm.expand("P", map[string]any{}, nil)
		if cerr == nil && !strings.Contains(s, "{{") && got != s && !badHeaderValue(s) {
			t.Errorf("a template without placeholders expanded %q to %q", s, got)
		}
	})
}

func FuzzParseSecrets(f *testing.F) {
	for _, s := range []string{`{"alice": {"t": "v"}}`, `{"a": {"t": 1}}`, `[]`, `{"a": {"t": "x\r\ny"}}`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		s, err := parseSecrets("f.json", []byte(data))
		if err != nil {
			return
		}
		for p, m := range s.values {
			for name, v := range m {
				if badHeaderValue(v) {
					t.Errorf("secret %q of %q kept with a control character", name, p)
				}
			}
		}
	})
}
