package config

import (
	"encoding/json"
	"slices"
)

// Decoding "gateway.auth.server" (authserver.go) and filling the defaults
// that depend on other keys of "gateway.auth".

// authServer decodes "gateway.auth.server": true (every default) or an
// object.
func (d *decoder) authServer(path string, raw json.RawMessage, dst **AuthServer) {
	s := NewAuthServer()
	if trimSpace(raw) == "true" {
		s.SignInCode = true // no users: the first sign-in needs a way in
		*dst = s
		return
	}
	if trimSpace(raw) == "false" {
		return
	}
	signInCodeSet := false
	if !d.fields(path, raw, "true or an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "issuer":
			d.str(p, v, &s.Issuer, true)
		case "users":
			d.authUsers(p, v, &s.Users)
		case "signInCode":
			d.boolean(p, v, &s.SignInCode)
			signInCodeSet = true
		case "redirectUris":
			d.strs(p, v, &s.RedirectURIs, true)
		case "loopbackRedirects":
			d.boolean(p, v, &s.LoopbackRedirects)
		case "registration":
			d.boolean(p, v, &s.Registration)
		case "clientMetadataDocuments":
			d.boolean(p, v, &s.ClientMetadataDocuments)
		case "scopes":
			d.strs(p, v, &s.Scopes, false)
		case "accessTokenTtl":
			d.duration(p, v, &s.AccessTokenTTL)
		case "refreshTokenTtl":
			d.duration(p, v, &s.RefreshTokenTTL)
		case "stateFile":
			d.str(p, v, &s.StateFile, true)
		case "passkeys":
			d.boolean(p, v, &s.Passkeys)
		default:
			return false
		}
		return true
	}) {
		return
	}
	if !signInCodeSet {
		// The first sign-in of a gateway without users needs a way in.
		s.SignInCode = len(s.Users) == 0
	}
	*dst = s
}

// authUsers decodes "gateway.auth.server.users".
func (d *decoder) authUsers(path string, raw json.RawMessage, dst *[]AuthUser) {
	elems, ok := array(raw)
	if !ok {
		d.problems.add(path, `must be an array of objects like {"name": "me", "passwordHash": "$argon2id$..."}`)
		return
	}
	users := make([]AuthUser, 0, len(elems))
	for i, e := range elems {
		var u AuthUser
		if d.fields(index(path, i), e, "an object", func(key, p string, v json.RawMessage) bool {
			switch key {
			case "name":
				d.str(p, v, &u.Name, false)
			case "passwordHash":
				d.str(p, v, &u.PasswordHash, true)
			default:
				return false
			}
			return true
		}) {
			users = append(users, u)
		}
	}
	*dst = users
}

// serverDefaults fills the settings of the authorization server that
// default to other keys of the auth block: the issuer to publicUrl, the
// scopes to the oauth block's (or "mcp"), the state file's name.
func (a *Auth) serverDefaults() {
	s := a.Server
	if s == nil {
		return
	}
	if s.Issuer == "" {
		s.Issuer = a.PublicURL
	}
	if s.Scopes == nil {
		if a.OAuth != nil && len(a.OAuth.Scopes) > 0 {
			s.Scopes = slices.Clone(a.OAuth.Scopes)
		} else {
			s.Scopes = []string{"mcp"}
		}
	}
	if s.RedirectURIs == nil {
		s.RedirectURIs = slices.Clone(DefaultRedirectURIs)
	}
	if s.StateFile == "" {
		s.StateFile = DefaultStateFile
	}
}
