package config

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
)

// Decoding the "gateway.auth" block and a server's or endpoint's "auth" into
// types of auth.go, with a problem for every key that does not fit.

// auth decodes the "gateway.auth" block.
func (d *decoder) auth(path string, raw json.RawMessage, dst **Auth) {
	a := NewAuth()
	if !d.fields(path, raw, "an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "oauth":
			d.oauth(p, v, &a.OAuth)
		case "server":
			d.authServer(p, v, &a.Server)
		case "apiKeys":
			d.apiKeys(p, v, &a.APIKeys)
		case "publicUrl":
			d.str(p, v, &a.PublicURL, true)
		case "required":
			d.boolean(p, v, &a.Required)
		default:
			return false
		}
		return true
	}) {
		return
	}
	a.serverDefaults()
	if a.Server != nil && d.editor.file != "" && !filepath.IsAbs(a.Server.StateFile) {
		// Relative to the config file, not to wherever the gateway was
		// started from.
		a.Server.StateFile = filepath.Join(filepath.Dir(d.editor.file), a.Server.StateFile)
	}
	*dst = a
}

// oauth decodes "gateway.auth.oauth".
func (d *decoder) oauth(path string, raw json.RawMessage, dst **OAuth) {
	o := &OAuth{}
	if !d.fields(path, raw, "an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "issuers":
			elems, ok := array(v)
			if !ok {
				d.problems.add(p, `must be an array of objects like {"issuer": "https://auth.example.com"}`)
				return true
			}
			o.Issuers = make([]Issuer, 0, len(elems))
			for i, e := range elems {
				if is, ok := d.issuer(index(p, i), e); ok {
					o.Issuers = append(o.Issuers, is)
				}
			}
		case "scopes":
			d.strs(p, v, &o.Scopes, false)
		case "resourceName":
			d.str(p, v, &o.ResourceName, false)
		default:
			return false
		}
		return true
	}) {
		return
	}
	*dst = o
}

// issuer decodes one entry of "issuers".
func (d *decoder) issuer(path string, raw json.RawMessage) (Issuer, bool) {
	var is Issuer
	ok := d.fields(path, raw, "an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "issuer":
			d.str(p, v, &is.Issuer, true)
		case "jwksUrl":
			d.str(p, v, &is.JWKSURL, true)
		case "audiences":
			d.strs(p, v, &is.Audiences, true)
		case "algorithms":
			d.strs(p, v, &is.Algorithms, false)
		case "introspection":
			in := &Introspection{}
			if d.fields(p, v, "an object", func(key, p string, v json.RawMessage) bool {
				switch key {
				case "url":
					d.str(p, v, &in.URL, true)
				case "clientId":
					d.str(p, v, &in.ClientID, true)
				case "clientSecret":
					d.str(p, v, &in.ClientSecret, true)
				default:
					return false
				}
				return true
			}) {
				is.Introspection = in
			}
		default:
			return false
		}
		return true
	})
	if is.Algorithms == nil {
		is.Algorithms = slices.Clone(AllowedAlgorithms)
	}
	return is, ok
}

// apiKeys decodes "gateway.auth.apiKeys".
func (d *decoder) apiKeys(path string, raw json.RawMessage, dst *[]APIKey) {
	elems, ok := array(raw)
	if !ok {
		d.problems.add(path, `must be an array of objects like {"name": "ci", "sha256": "..."}`)
		return
	}
	keys := make([]APIKey, 0, len(elems))
	for i, e := range elems {
		var k APIKey
		if d.fields(index(path, i), e, "an object", func(key, p string, v json.RawMessage) bool {
			switch key {
			case "name":
				d.str(p, v, &k.Name, false)
			case "sha256":
				d.str(p, v, &k.SHA256, false)
			case "keyFile":
				d.str(p, v, &k.KeyFile, true)
			case "keyEnv":
				if d.str(p, v, &k.KeyEnv, false) && validEnvName(k.KeyEnv) {
					// Checked here, where the environment is known, as
					// ${VAR} is: the gateway reads it again at start.
					if val, ok := d.lookupEnv(k.KeyEnv); !ok {
						d.problems.add(p, "environment variable %q is not set", k.KeyEnv)
					} else if strings.TrimSpace(val) == "" {
						d.problems.add(p, "environment variable %q is empty", k.KeyEnv)
					}
				}
			case "servers":
				d.strs(p, v, &k.Servers, false)
			case "endpoints":
				d.strs(p, v, &k.Endpoints, false)
			case "scopes":
				d.strs(p, v, &k.Scopes, false)
			default:
				return false
			}
			return true
		}) {
			keys = append(keys, k)
		}
	}
	*dst = keys
}

// targetAuth decodes a server's or endpoint's "auth": true, false or
// {"scopes": [...]}.
func (d *decoder) targetAuth(path string, raw json.RawMessage, dst **TargetAuth) {
	switch trimSpace(raw) {
	case "false":
		*dst = &TargetAuth{Off: true}
		return
	case "true":
		*dst = &TargetAuth{}
		return
	}
	t := &TargetAuth{}
	if d.fields(path, raw, `true, false or an object like {"scopes": ["mcp"]}`, func(key, p string, v json.RawMessage) bool {
		if key != "scopes" {
			return false
		}
		d.strs(p, v, &t.Scopes, false)
		return true
	}) {
		*dst = t
	}
}
