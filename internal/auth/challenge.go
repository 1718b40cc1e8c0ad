package auth

import (
	"encoding/json"
	"strings"
)

// What a refused client and a discovering client read: the WWW-Authenticate
// challenge (RFC 6750, RFC 9728 §5.1) and the protected resource metadata
// document (RFC 9728 §2).

// challenge builds a WWW-Authenticate value of the Bearer scheme (RFC
// 6750 section 3, with RFC 9728's resource_metadata): the error code if
// any, the metadata document's URL (which MCP clients need absolute), the
// scopes needed, and the description.
func challenge(code, metadata string, scopes []string, description string) string {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	param := func(name, value string) {
		b.WriteString(sep)
		sep = ", "
		b.WriteString(name)
		b.WriteString(`="`)
		b.WriteString(value)
		b.WriteByte('"')
	}
	if code != "" {
		param("error", code)
	}
	if metadata != "" {
		param("resource_metadata", quotable(metadata))
	}
	if len(scopes) > 0 {
		param("scope", quotable(strings.Join(scopes, " ")))
	}
	if description != "" {
		param("error_description", quotable(description))
	}
	return b.String()
}

// quotable makes s fit in a quoted header parameter as RFC 6750 writes
// them (printable ASCII but '"' and '\'), and short: a description may
// carry a token's claims, which its sender chose.
func quotable(s string) string {
	const max = 300
	var b strings.Builder
	for _, r := range s {
		switch {
		case b.Len() >= max:
			b.WriteString("...")
			return b.String()
		case r == '"':
			b.WriteByte('\'')
		case r < ' ' || r > '~' || r == '\\':
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// metadataDoc is an RFC 9728 protected resource metadata document.
type metadataDoc struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// Metadata implements [Authenticator]. With API keys only, the document
// names no authorization server: there is none to get a token from.
func (g *Gate) Metadata(t Target) ([]byte, bool) {
	protected, scopes := g.policy(t)
	if !protected {
		return nil, false
	}
	doc := metadataDoc{
		Resource:               t.Resource,
		AuthorizationServers:   g.issuerIDs,
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           g.resourceName,
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // URLs with & stay readable
	if err := enc.Encode(doc); err != nil {
		return nil, false // strings and slices of strings always encode
	}
	return []byte(b.String()), true
}
