package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sealSecret is the base64 of a 32-byte key made of b: no problem, error
// or String may contain it.
func sealSecret(b byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

// sealConfig is a valid config whose gateway block has the given members.
func sealConfig(gateway string) string {
	return `{"gateway": {` + gateway + `}, "mcpServers": {"m": {"command": "x"}}}`
}

func TestSealKeysParse(t *testing.T) {
	env := map[string]string{"K2": sealSecret(2)}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := Parse([]byte(sealConfig(`"sealKeys": [
	  {"id": "k1", "key": "`+sealSecret(1)+`"},
	  {"id": "k2", "key": "${K2}", "primary": true}]`)), lookup)
	if err != nil {
		t.Fatal(err)
	}
	keys := cfg.Gateway.SealKeys
	if len(keys) != 2 || keys[0].ID != "k1" || keys[0].Primary || !bytes.Equal(keys[0].Secret, bytes.Repeat([]byte{1}, 32)) ||
		keys[1].ID != "k2" || !keys[1].Primary || !bytes.Equal(keys[1].Secret, bytes.Repeat([]byte{2}, 32)) {
		t.Fatalf("keys: %v", keys)
	}
	for _, text := range []string{fmt.Sprint(keys), fmt.Sprintf("%#v %+v", cfg.Gateway, cfg.Gateway)} {
		if strings.Contains(text, sealSecret(1)) || strings.Contains(text, string(keys[0].Secret)) {
			t.Errorf("formatted config shows a seal key: %s", text)
		}
	}

	// A lone key is the primary; URL-safe unpadded base64 is accepted.
	url := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32))
	cfg, err = Parse([]byte(sealConfig(`"sealKeys": [{"id": "only", "key": "`+url+`"}]`)), nil)
	if err != nil || len(cfg.Gateway.SealKeys) != 1 || !cfg.Gateway.SealKeys[0].Primary {
		t.Fatalf("a lone key: %v, %v", cfg, err)
	}
	// None: none (the gateway makes a random key).
	if cfg, err := Parse([]byte(sealConfig(``)), nil); err != nil || cfg.Gateway.SealKeys != nil {
		t.Fatalf("no keys: %v, %v", cfg, err)
	}
}

func TestSealKeysProblems(t *testing.T) {
	k1, k2 := sealSecret(1), sealSecret(2)
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	for _, tc := range []struct {
		name, gateway string
		want          []string // "path: message" prefixes, every problem
	}{
		{"bad key length", `"sealKeys": [{"id": "a", "key": "` + short + `"}]`,
			[]string{"gateway.sealKeys[0].key: is 16 bytes, want 32"}},
		{"not base64", `"sealKeys": [{"id": "a", "key": "not base64!"}]`,
			[]string{"gateway.sealKeys[0].key: is not base64"}},
		{"duplicate id", `"sealKeys": [{"id": "a", "key": "` + k1 + `", "primary": true}, {"id": "a", "key": "` + k2 + `"}]`,
			[]string{`gateway.sealKeys[1].id: duplicate id "a" (also gateway.sealKeys[0])`}},
		{"two primaries", `"sealKeys": [{"id": "a", "key": "` + k1 + `", "primary": true}, {"id": "b", "key": "` + k2 + `", "primary": true}]`,
			[]string{"gateway.sealKeys[1].primary: gateway.sealKeys[0] is primary already"}},
		{"none primary", `"sealKeys": [{"id": "a", "key": "` + k1 + `"}, {"id": "b", "key": "` + k2 + `"}]`,
			[]string{`gateway.sealKeys: no key is "primary": true`}},
		{"bad id", `"sealKeys": [{"id": "a b", "key": "` + k1 + `"}]`,
			[]string{`gateway.sealKeys[0].id: key id "a b": use only letters`}},
		{"missing id and key", `"sealKeys": [{"primary": true}]`,
			[]string{"gateway.sealKeys[0].id: a key id is 1 to 64 characters", "gateway.sealKeys[0].key: is 0 bytes, want 32"}},
		{"unknown member", `"sealKeys": [{"id": "a", "key": "` + k1 + `", "kid": "x"}]`,
			[]string{"gateway.sealKeys[0].kid: unknown key"}},
		{"not an array", `"sealKeys": {"id": "a"}`,
			[]string{"gateway.sealKeys: must be an array"}},
		{"unset variable", `"sealKeys": [{"id": "a", "key": "${NOPE}"}]`,
			[]string{`gateway.sealKeys[0].key: environment variable "NOPE" is not set`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(sealConfig(tc.gateway)), nil)
			checkProblems(t, err, tc.want, k1, k2)
		})
	}
}

// checkProblems checks that err is Problems with exactly the wanted
// ones ("path: part of the message", in order) and names no secret.
func checkProblems(t *testing.T, err error, want []string, secrets ...string) {
	t.Helper()
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %v, want Problems %q", err, want)
	}
	if len(ps) != len(want) {
		t.Fatalf("problems %q, want %q", ps, want)
	}
	for i, p := range ps {
		path, msg, _ := strings.Cut(want[i], ": ")
		if p.Path != path || !strings.Contains(p.Msg, msg) {
			t.Errorf("problem %d: %q, want %q", i, p.Path+": "+p.Msg, want[i])
		}
		for _, s := range secrets {
			if strings.Contains(p.Msg, s) {
				t.Errorf("problem %q shows a seal key", p.Msg)
			}
		}
	}
}

func TestSealKeyFile(t *testing.T) {
	k1, k2 := sealSecret(1), sealSecret(2)
	write := func(content string) string {
		path := filepath.Join(t.TempDir(), "seal.json")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write(`[{"id": "a", "key": "` + k1 + `"}, {"id": "b", "key": "` + k2 + `", "primary": true}]`)
	cfg, err := Parse([]byte(sealConfig(`"sealKeyFile": "`+good+`"`)), nil)
	if err != nil || cfg.Gateway.SealKeyFile != good || len(cfg.Gateway.SealKeys) != 2 || !cfg.Gateway.SealKeys[1].Primary {
		t.Fatalf("key file: %v, %v", cfg, err)
	}

	for _, tc := range []struct {
		name, gateway string
		want          []string
	}{
		{"both", `"sealKeyFile": "` + good + `", "sealKeys": [{"id": "c", "key": "` + k1 + `"}]`,
			[]string{`gateway.sealKeyFile: set "sealKeys" or "sealKeyFile", not both`}},
		{"missing", `"sealKeyFile": "` + filepath.Join(t.TempDir(), "none.json") + `"`,
			[]string{"gateway.sealKeyFile: cannot read"}},
		{"not JSON", `"sealKeyFile": "` + write(`[{"id": "a", "key": "`+k1+`"`) + `"`,
			[]string{"gateway.sealKeyFile: is not valid JSON"}},
		{"empty", `"sealKeyFile": "` + write(`[]`) + `"`,
			[]string{"gateway.sealKeyFile: lists no key"}},
		{"two primaries", `"sealKeyFile": "` + write(`[{"id": "a", "key": "`+k1+`", "primary": true}, {"id": "b", "key": "`+k2+`", "primary": true}]`) + `"`,
			[]string{"gateway.sealKeyFile[1].primary: gateway.sealKeyFile[0] is primary already"}},
		{"no expansion in the file", `"sealKeyFile": "` + write(`[{"id": "a", "key": "${K}"}]`) + `"`,
			[]string{"gateway.sealKeyFile[0].key: is not base64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(sealConfig(tc.gateway)), func(string) (string, bool) { return k1, true })
			checkProblems(t, err, tc.want, k1, k2)
		})
	}
}

// A Config built in code is checked by Validate as a parsed one is.
func TestSealKeysValidate(t *testing.T) {
	cfg := &Config{Gateway: Defaults(), Servers: map[string]*Server{}}
	cfg.Gateway.SealKeys = []SealKey{{ID: "a", Secret: make([]byte, 32)}, {ID: "b", Secret: make([]byte, 31), Primary: true}}
	var ps Problems
	if !errors.As(cfg.Validate(), &ps) {
		t.Fatal("no problems")
	}
	if !strings.Contains(ps.Error(), "gateway.sealKeys[1].key: is 31 bytes, want 32") {
		t.Fatalf("problems: %v", ps)
	}
}

// FuzzSealKeys decodes and checks any gateway.sealKeys value: no panic,
// and a parsed ring always has exactly one primary of valid keys.
func FuzzSealKeys(f *testing.F) {
	f.Add(`[{"id": "a", "key": "` + sealSecret(1) + `"}]`)
	f.Add(`[{"id": "a", "key": "` + sealSecret(1) + `", "primary": true}, {"id": "b", "key": "${K}"}]`)
	f.Add(`[{"id": "", "key": "QQ=="}, {}]`)
	f.Add(`{"id": "a"}`)
	f.Fuzz(func(t *testing.T, raw string) {
		d := &decoder{lookupEnv: func(string) (string, bool) { return sealSecret(2), true }}
		g := Defaults()
		d.sealKeys("gateway.sealKeys", []byte(raw), &g.SealKeys, true)
		ps := d.problems
		g.checkSeal(&ps, "gateway")
		if len(ps) > 0 {
			return
		}
		primaries := 0
		for _, k := range g.SealKeys {
			if len(k.Secret) != 32 || k.ID == "" {
				t.Fatalf("accepted key %v of %d bytes", k, len(k.Secret))
			}
			if k.Primary {
				primaries++
			}
		}
		if len(g.SealKeys) > 0 && primaries != 1 {
			t.Fatalf("accepted %d primaries in %v", primaries, g.SealKeys)
		}
	})
}
