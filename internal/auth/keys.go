package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// API keys: read from the config (a SHA-256, a file or a variable), hashed in
// memory, and matched in constant time.

// apiKey is one API key at run time: its hash only.
type apiKey struct {
	name                 string
	hash                 [sha256.Size]byte
	everything           bool // neither servers nor endpoints were given
	allServers, allEndps bool
	servers, endpoints   map[string]bool
	scopes               []string
}

// newAPIKey reads and hashes one API key.
func newAPIKey(c APIKey, defaultScopes []string, lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) (apiKey, error) {
	k := apiKey{name: c.Name, scopes: c.Scopes, everything: c.Servers == nil && c.Endpoints == nil,
		servers: map[string]bool{}, endpoints: map[string]bool{}}
	if k.scopes == nil {
		k.scopes = defaultScopes
	}
	k.scopes = slices.Clone(k.scopes)
	if c.Name == "" {
		return k, errors.New("an API key has no name")
	}
	fail := func(format string, args ...any) (apiKey, error) {
		return k, fmt.Errorf("API key %q: "+format, append([]any{c.Name}, args...)...)
	}
	var secret, from string
	switch {
	case c.SHA256 != "" && c.KeyFile == "" && c.KeyEnv == "":
		b, err := hex.DecodeString(c.SHA256)
		if err != nil || len(b) != sha256.Size {
			return fail("sha256 is not 64 hex digits")
		}
		copy(k.hash[:], b)
	case c.KeyFile != "" && c.SHA256 == "" && c.KeyEnv == "":
		data, err := readFile(c.KeyFile)
		if err != nil {
			return fail("keyFile: %w", err)
		}
		secret, from = strings.TrimSpace(string(data)), "file "+c.KeyFile
	case c.KeyEnv != "" && c.SHA256 == "" && c.KeyFile == "":
		v, ok := lookupEnv(c.KeyEnv)
		if !ok {
			return fail("keyEnv: environment variable %q is not set", c.KeyEnv)
		}
		secret, from = strings.TrimSpace(v), "environment variable "+c.KeyEnv
	default:
		return fail("give exactly one of sha256, keyFile, keyEnv")
	}
	if from != "" {
		// The key's length and characters may be told, never the key.
		switch {
		case secret == "":
			return fail("the %s is empty", from)
		case len(secret) < minKeyLength:
			return fail("the key in the %s has %d characters: use at least %d (e.g. `openssl rand -hex 32`)", from, len(secret), minKeyLength)
		case !isB64Token(secret):
			return fail("the key in the %s has characters a bearer token cannot carry (use letters, digits and - . _ ~ + /)", from)
		}
		k.hash = sha256.Sum256([]byte(secret))
	}
	for _, s := range c.Servers {
		k.allServers = k.allServers || s == "*"
		k.servers[s] = true
	}
	for _, e := range c.Endpoints {
		k.allEndps = k.allEndps || e == "*"
		k.endpoints[e] = true
	}
	return k, nil
}

// allows reports whether key k may be used for target t.
func (k *apiKey) allows(t Target) bool {
	if k.everything {
		return true
	}
	switch t.Kind {
	case "server":
		return k.allServers || k.servers[t.Name]
	case "endpoint":
		return k.allEndps || k.endpoints[t.Name]
	}
	return false
}

// matchKey returns the API key token is, or nil. Every key's hash is
// compared in constant time, so that the time taken says nothing of
// which key came close.
func (g *Gate) matchKey(token string) *apiKey {
	h := sha256.Sum256([]byte(token))
	var found *apiKey
	for i := range g.keys {
		if subtle.ConstantTimeCompare(h[:], g.keys[i].hash[:]) == 1 {
			found = &g.keys[i]
		}
	}
	return found
}
