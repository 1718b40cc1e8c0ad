package authserver

import (
	"net/http"
	"slices"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// metadata is the server's RFC 8414 document, also served as OpenID
// discovery (clients that look there first find the same endpoints).
type metadata struct {
	oidc.DiscoveryConfiguration
	// RFC 9207: the redirect carries "iss", so a client talking to
	// several servers knows which one answered.
	IssParameterSupported bool `json:"authorization_response_iss_parameter_supported"`
}

// metadata builds the document from the config (the endpoints are the
// issuer's; registration and client ID metadata documents as
// configured).
func (p *provider) metadata() metadata {
	cfg := p.s.cfg
	m := metadata{DiscoveryConfiguration: oidc.DiscoveryConfiguration{
		Issuer:                                 cfg.Issuer,
		AuthorizationEndpoint:                  p.url("/oauth/authorize"),
		TokenEndpoint:                          p.url("/oauth/token"),
		RevocationEndpoint:                     p.url("/oauth/revoke"),
		JwksURI:                                p.url("/oauth/jwks"),
		ScopesSupported:                        slices.Clone(cfg.Scopes),
		ResponseTypesSupported:                 []string{"code"},
		ResponseModesSupported:                 []string{"query"},
		GrantTypesSupported:                    []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken},
		TokenEndpointAuthMethodsSupported:      []oidc.AuthMethod{oidc.AuthMethodNone, oidc.AuthMethodPost, oidc.AuthMethodBasic},
		RevocationEndpointAuthMethodsSupported: []oidc.AuthMethod{oidc.AuthMethodNone, oidc.AuthMethodPost, oidc.AuthMethodBasic},
		CodeChallengeMethodsSupported:          []oidc.CodeChallengeMethod{oidc.CodeChallengeMethodS256},
		ClientIDMetadataDocumentSupported:      cfg.ClientMetadataDocuments,
	}, IssParameterSupported: true}
	if cfg.Registration {
		m.RegistrationEndpoint = p.url("/oauth/register")
	}
	return m
}

// serveMetadata serves the metadata document, to anyone.
func (p *provider) serveMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, p.metadata())
}

// serveJWKS serves the keys that verify the access tokens: one per key
// of the ring, so that a token signed by a key still in the ring (the
// old primary during a rotation) verifies anywhere.
func (p *provider) serveJWKS(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, p.keys.jwks())
}
