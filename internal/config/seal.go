package config

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mcpgate/mcpgate/internal/seal"
)

// The keys of gateway.sealKeys (or of the file gateway.sealKeyFile names)
// seal what the gateway gives clients to give back (requestState): every
// replica that serves the same clients lists the same keys. Rotation is
// three reloads: add the new key, promote it ("primary": true, the old
// key's removed), retire the old key once what it sealed has expired.

// SealKey is one entry of gateway.sealKeys. Its String and GoString
// name it by id only: the secret is never formatted.
type SealKey struct {
	// ID names the key in every value it seals (key "id"): 1 to 64
	// letters, digits, '.', '_' and '-'. Required.
	ID string
	// Secret is the key (key "key"): 32 bytes, written as base64
	// (standard or URL alphabet, padded or not); in gateway.sealKeys it
	// expands ${VAR}, so the file need not hold it. Required.
	Secret []byte
	// Primary marks the one key that seals (key "primary"); the others
	// only open. Default false, but a lone key is the primary.
	Primary bool
}

// String names the key without its secret.
func (k SealKey) String() string { return fmt.Sprintf("seal key %q (primary %v)", k.ID, k.Primary) }

// GoString is String, so that %#v redacts too.
func (k SealKey) GoString() string { return k.String() }

// sealKeys decodes an array of seal keys at path, expanding ${VAR} in the
// secrets if expandEnv (in the config, not in a key file).
func (d *decoder) sealKeys(path string, raw json.RawMessage, dst *[]SealKey, expandEnv bool) {
	elems, ok := array(raw)
	if !ok {
		d.problems.add(path, `must be an array of {"id": "...", "key": "BASE64", "primary": true}`)
		return
	}
	keys := make([]SealKey, 0, len(elems))
	for i, e := range elems {
		var k SealKey
		d.fields(index(path, i), e, "an object", func(key, p string, v json.RawMessage) bool {
			switch key {
			case "id":
				d.str(p, v, &k.ID, false)
			case "key":
				var s string
				if d.str(p, v, &s, expandEnv) {
					k.Secret = d.base64Key(p, s)
				}
			case "primary":
				d.boolean(p, v, &k.Primary)
			default:
				return false
			}
			return true
		})
		keys = append(keys, k)
	}
	if len(keys) == 1 {
		keys[0].Primary = true
	}
	*dst = keys
}

// base64Key decodes a key's base64, recording a problem at path (which
// never quotes the value) if it is not base64.
func (d *decoder) base64Key(path, s string) []byte {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b
		}
	}
	d.problems.add(path, "is not base64 (make a key with: openssl rand -base64 32)")
	return nil
}

// sealKeyFile decodes gateway.sealKeyFile and returns the keys of the
// file it names, a JSON array shaped as gateway.sealKeys (its secrets
// are not expanded). Its problems are at path, the file's entries as
// path[i].
func (d *decoder) sealKeyFile(path string, raw json.RawMessage, g *Gateway) []SealKey {
	if !d.str(path, raw, &g.SealKeyFile, true) || g.SealKeyFile == "" {
		return nil
	}
	data, err := os.ReadFile(g.SealKeyFile)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		d.problems.add(path, "cannot read %q: %v", g.SealKeyFile, err)
		return nil
	}
	if json.Unmarshal(data, new(json.RawMessage)) != nil {
		// Not the JSON error: it may quote a byte of a key.
		d.problems.add(path, "%q is not valid JSON", g.SealKeyFile)
		return nil
	}
	var keys []SealKey
	d.sealKeys(path, data, &keys, false)
	return keys
}

// useSealKeyFile puts the keys read from gateway.sealKeyFile (at path) in
// g.SealKeys, unless gateway.sealKeys is set too.
func (d *decoder) useSealKeyFile(path string, g *Gateway, keys []SealKey) {
	if g.SealKeyFile == "" {
		return
	}
	if g.SealKeys != nil {
		d.problems.add(path, `set "sealKeys" or "sealKeyFile", not both`)
		return
	}
	g.SealKeys = keys
}

// checkSeal checks the seal keys: each id valid and listed once, each
// secret seal.KeySize bytes, exactly one primary. Their paths are those
// of gateway.sealKeyFile when the keys came from it.
func (g *Gateway) checkSeal(ps *Problems, path string) {
	keysPath := join(path, "sealKeys")
	if g.SealKeyFile != "" {
		keysPath = join(path, "sealKeyFile")
		if len(g.SealKeys) == 0 {
			ps.add(keysPath, "%q lists no key", g.SealKeyFile)
			return
		}
	}
	keys := g.SealKeys
	if len(keys) == 0 {
		return
	}
	seen := map[string]int{}
	primary := -1
	for i, k := range keys {
		p := index(keysPath, i)
		if err := seal.CheckID(k.ID); err != nil {
			ps.add(join(p, "id"), "%v", err)
		} else if j, dup := seen[k.ID]; dup {
			ps.add(join(p, "id"), "duplicate id %q (also %s)", k.ID, index(keysPath, j))
		} else {
			seen[k.ID] = i
		}
		if len(k.Secret) != seal.KeySize {
			ps.add(join(p, "key"), "is %d bytes, want %d (make a key with: openssl rand -base64 32)", len(k.Secret), seal.KeySize)
		}
		if k.Primary {
			if primary >= 0 {
				ps.add(join(p, "primary"), "%s is primary already: exactly one key seals", index(keysPath, primary))
			} else {
				primary = i
			}
		}
	}
	if primary < 0 {
		ps.add(keysPath, `no key is "primary": true: exactly one key seals, the others only open`)
	}
}
