package authserver

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMetadataDocumentRules(t *testing.T) {
	p := defaultPolicy(t)
	base := `"client_id":"https://app.example/c.json","redirect_uris":["http://127.0.0.1/cb"]`
	for _, tc := range []struct {
		name, body, want string // want "" : accepted
	}{
		{"public", `{` + base + `,"client_name":"App"}`, ""},
		{"none said", `{` + base + `,"client_name":"App","token_endpoint_auth_method":"none"}`, ""},
		{"no name", `{` + base + `}`, "client_name"},
		{"secret basic", `{` + base + `,"client_name":"App","token_endpoint_auth_method":"client_secret_basic"}`, "token_endpoint_auth_method"},
		{"secret post", `{` + base + `,"client_name":"App","token_endpoint_auth_method":"client_secret_post"}`, "token_endpoint_auth_method"},
		{"secret jwt", `{` + base + `,"client_name":"App","token_endpoint_auth_method":"client_secret_jwt"}`, "token_endpoint_auth_method"},
		{"private key jwt", `{` + base + `,"client_name":"App","token_endpoint_auth_method":"private_key_jwt"}`, "token_endpoint_auth_method"},
		{"carries a secret", `{` + base + `,"client_name":"App","client_secret":"s"}`, "client_secret"},
		{"carries a secret expiry", `{` + base + `,"client_name":"App","client_secret_expires_at":0}`, "client_secret"},
		{"carries a null secret", `{` + base + `,"client_name":"App","client_secret":null}`, "client_secret"},
		{"bad redirect", `{"client_id":"x","client_name":"A","redirect_uris":["https://evil.com/cb"]}`, "redirect_uris[0]"},
	} {
		m, err := decodeMetadata([]byte(tc.body))
		var c *Client
		if err == nil {
			c, err = m.toClient(p, true)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want == "" && c.AuthMethod != clientAuthNone:
			t.Errorf("%s: auth method %q, want none", tc.name, c.AuthMethod)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a refusal naming %s", tc.name, err, tc.want)
		}
	}
}

// FuzzDecodeRegistration feeds any bytes to the registration decoder and
// checks that what it accepts is within every bound, for a registration
// and for a client metadata document alike.
func FuzzDecodeRegistration(f *testing.F) {
	for _, s := range []string{
		`{"redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none","client_name":"Claude"}`,
		`{"redirect_uris":["http://127.0.0.1:1/cb","http://[::1]/x?y"],"grant_types":["authorization_code","refresh_token"],"response_types":["code"],"client_uri":"https://a.example"}`,
		`{"redirect_uris":["https://claude.ai@evil.com/"],"client_id":"https://a.example/c.json","client_secret":"x"}`,
		`{"redirect_uris":null,"grant_types":[null],"client_name":"\u202e"}`,
		`[]`, `null`, `{"redirect_uris":[1]}`, `{"a":1,"a":2}`,
	} {
		f.Add([]byte(s), false)
	}
	p := defaultPolicy(f)
	f.Fuzz(func(t *testing.T, data []byte, document bool) {
		m, err := decodeMetadata(data)
		if err != nil {
			if _, ok := err.(*metadataError); !ok {
				t.Fatalf("decode error %T is not an RFC 7591 error", err)
			}
			return
		}
		c, err := m.toClient(p, document)
		if err != nil {
			me, ok := err.(*metadataError)
			if !ok || (me.Code != "invalid_client_metadata" && me.Code != "invalid_redirect_uri") || me.Description == "" {
				t.Fatalf("refusal %#v is not an RFC 7591 error", err)
			}
			return
		}
		if len(c.RedirectURIs) == 0 || len(c.RedirectURIs) > maxRedirectURIs {
			t.Fatalf("accepted %d redirect URIs", len(c.RedirectURIs))
		}
		for _, u := range c.RedirectURIs {
			if p.check(u) != nil {
				t.Fatalf("accepted redirect URI %q the policy refuses", u)
			}
		}
		if !slices.Contains([]string{clientAuthNone, clientAuthPost, clientAuthBasic}, c.AuthMethod) || document && c.AuthMethod != clientAuthNone {
			t.Fatalf("accepted auth method %q (document %v)", c.AuthMethod, document)
		}
		if len(c.Name) > maxClientName || !utf8.ValidString(c.Name) || document && c.Name == "" {
			t.Fatalf("accepted name %q", c.Name)
		}
		if c.URI != "" && checkClientURI(c.URI) != nil {
			t.Fatalf("accepted client_uri %q", c.URI)
		}
		if !slices.Equal(m.ResponseTypes, []string{"code"}) || !slices.Contains(m.GrantTypes, "authorization_code") || len(m.GrantTypes) > 2 {
			t.Fatalf("accepted types %v %v", m.GrantTypes, m.ResponseTypes)
		}
	})
}
