// Package authserver is the gateway's own OAuth 2.1 authorization server
// (gateway.auth.server): for a personal gateway that Claude's connectors,
// which authenticate with OAuth only, can use without a separate identity
// provider. It issues short-lived JWT access tokens signed with keys
// derived from the gateway's key ring, which the gateway's resource
// server (internal/auth) checks like any issuer's, and opaque refresh
// tokens that rotate on every use.
//
// The gateway builds one Server (New) when the config has
// gateway.auth.server and serves its Handler at the issuer's paths; the
// Store keeps its records (memory and a state file for one replica,
// Redis for several).
package authserver
