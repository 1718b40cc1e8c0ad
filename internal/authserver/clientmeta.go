package authserver

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Client metadata (RFC 7591 2): what a client says about itself, in a
// registration request or in its client ID metadata document. Both are
// decoded and checked here, so that the two ways a client comes to exist
// accept the same things.
//
// We keep what the provider and the consent page use (redirect URIs, the
// token endpoint auth method, a name and a home page) and ignore the rest,
// as RFC 7591 2 asks of metadata a server does not use: logo_uri (the
// pages load nothing from elsewhere), scope (the provider bounds scopes by
// gateway.auth.server.scopes), contacts, jwks, software statements.

// Bounds of what one client may register.
const (
	maxRedirectURIs = 10
	maxClientName   = 200
	maxClientURI    = 2000
)

// The token endpoint auth methods the provider serves.
const (
	clientAuthNone  = "none"
	clientAuthPost  = "client_secret_post"
	clientAuthBasic = "client_secret_basic"
)

// clientMetadata is the decoded JSON. Decoding is case-sensitive and
// refuses duplicate names (go-json-experiment's defaults), so that no
// second reading of the same bytes can find other values.
type clientMetadata struct {
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`

	// Only in a client ID metadata document: its own URL, and secrets it
	// must not carry (draft-ietf-oauth-client-id-metadata-document 4.1).
	ClientID              string         `json:"client_id,omitempty"`
	ClientSecret          jsontext.Value `json:"client_secret,omitzero"`
	ClientSecretExpiresAt jsontext.Value `json:"client_secret_expires_at,omitzero"`
}

// metadataError is a refusal of client metadata in RFC 7591 3.2.2 terms:
// invalid_redirect_uri or invalid_client_metadata, with a description
// that names the field.
type metadataError struct {
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *metadataError) Error() string { return e.Code + ": " + e.Description }

func badMetadata(format string, args ...any) *metadataError {
	return &metadataError{Code: "invalid_client_metadata", Description: fmt.Sprintf(format, args...)}
}

// decodeMetadata decodes a JSON object of client metadata. A value of the
// wrong type is refused naming its field.
func decodeMetadata(data []byte) (*clientMetadata, error) {
	var m clientMetadata
	if err := json.Unmarshal(data, &m); err != nil {
		var se *json.SemanticError
		if errors.As(err, &se) && se.JSONPointer != "" {
			field := strings.SplitN(strings.TrimPrefix(string(se.JSONPointer), "/"), "/", 2)[0]
			if field == "redirect_uris" {
				return nil, &metadataError{Code: "invalid_redirect_uri", Description: fmt.Sprintf("%s: wrong type", se.JSONPointer)}
			}
			return nil, badMetadata("%s: wrong type", se.JSONPointer)
		}
		return nil, badMetadata("not a JSON object of client metadata: %v", err)
	}
	return &m, nil
}

// toClient checks the metadata and returns the client it describes (ID,
// secret and times left for the caller). document selects the rules of a
// client ID metadata document: no shared secret (so "none" is the default
// and the only method) and a client_name required (MCP 2025-11-25).
func (m *clientMetadata) toClient(policy *redirectPolicy, document bool) (*Client, error) {
	if len(m.RedirectURIs) == 0 {
		return nil, &metadataError{Code: "invalid_redirect_uri", Description: "redirect_uris: at least one is required"}
	}
	if len(m.RedirectURIs) > maxRedirectURIs {
		return nil, &metadataError{Code: "invalid_redirect_uri", Description: fmt.Sprintf("redirect_uris: more than %d", maxRedirectURIs)}
	}
	var uris []string
	for i, u := range m.RedirectURIs {
		if err := policy.check(u); err != nil {
			return nil, &metadataError{Code: "invalid_redirect_uri", Description: fmt.Sprintf("redirect_uris[%d]: %v", i, err)}
		}
		if !slices.Contains(uris, u) {
			uris = append(uris, u)
		}
	}
	if err := m.checkTypes(); err != nil {
		return nil, err
	}
	method := m.TokenEndpointAuthMethod
	switch {
	case document && (len(m.ClientSecret) > 0 || len(m.ClientSecretExpiresAt) > 0):
		return nil, badMetadata("client_secret: a client metadata document carries no secret")
	case document && method != "" && method != clientAuthNone:
		return nil, badMetadata("token_endpoint_auth_method: a client metadata document's client is public (\"none\"), not %q", method)
	case method == "" && document:
		method = clientAuthNone
	case method == "":
		method = clientAuthBasic // RFC 7591 2
	case method != clientAuthNone && method != clientAuthPost && method != clientAuthBasic:
		return nil, badMetadata("token_endpoint_auth_method: %q is not one of none, client_secret_post, client_secret_basic", method)
	}
	if err := checkClientName(m.ClientName, document); err != nil {
		return nil, err
	}
	if m.ClientURI != "" {
		if err := checkClientURI(m.ClientURI); err != nil {
			return nil, err
		}
	}
	return &Client{Name: m.ClientName, URI: m.ClientURI, RedirectURIs: uris, AuthMethod: method}, nil
}

// checkTypes refuses grant and response types the provider does not
// serve (RFC 7591 2.1: authorization_code goes with the "code" response
// type, which is the only one), filling in the defaults.
func (m *clientMetadata) checkTypes() error {
	if m.GrantTypes == nil {
		m.GrantTypes = []string{"authorization_code"}
	}
	for i, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return badMetadata("grant_types[%d]: %q is not served (authorization_code and refresh_token are)", i, g)
		}
	}
	if !slices.Contains(m.GrantTypes, "authorization_code") {
		return badMetadata("grant_types: authorization_code is required")
	}
	if m.ResponseTypes == nil {
		m.ResponseTypes = []string{"code"}
	}
	if len(m.ResponseTypes) == 0 {
		return badMetadata("response_types: code is required")
	}
	for i, r := range m.ResponseTypes {
		if r != "code" {
			return badMetadata("response_types[%d]: %q is not served (code is)", i, r)
		}
	}
	m.GrantTypes = slices.Compact(slices.Sorted(slices.Values(m.GrantTypes)))
	m.ResponseTypes = m.ResponseTypes[:1]
	return nil
}

// checkClientName bounds the name the consent page shows and refuses
// control and format characters, which could make it read as something
// else (a right-to-left override, a fake line break).
func checkClientName(name string, required bool) error {
	if name == "" {
		if required {
			return badMetadata("client_name: required in a client metadata document")
		}
		return nil
	}
	if len(name) > maxClientName {
		return badMetadata("client_name: longer than %d bytes", maxClientName)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return badMetadata("client_name: control character %U", r)
		}
	}
	return nil
}

// checkClientURI accepts a plain https URL (http on loopback): the
// consent page shows its host as the client's home.
func checkClientURI(s string) error {
	if len(s) > maxClientURI {
		return badMetadata("client_uri: longer than %d bytes", maxClientURI)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return badMetadata("client_uri: byte %#x is not allowed", s[i])
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.User != nil || u.Host == "" || strings.IndexByte(u.Host, '%') >= 0 {
		return badMetadata("client_uri: not a plain URL")
	}
	loopback := loopbackHosts[strings.ToLower(u.Hostname())] || strings.EqualFold(u.Hostname(), "::1")
	if u.Scheme != "https" && !(u.Scheme == "http" && loopback) {
		return badMetadata("client_uri: not https")
	}
	return nil
}
