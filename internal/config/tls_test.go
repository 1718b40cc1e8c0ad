package config

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

func TestParseTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := testkit.WriteCert(t, dir, "gw", "mcp.example.com")
	env := func(k string) (string, bool) {
		if k == "TLS_DIR" {
			return dir, true
		}
		return "", false
	}
	cfg, err := Parse([]byte(`{"mcpServers": {"m": {"command": "m"}},
	  "gateway": {"tls": {"certFile": "${TLS_DIR}/gw.crt", "keyFile": "${TLS_DIR}/gw.key"}}}`), env)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Gateway.TLS; got == nil || got.CertFile != cert || got.KeyFile != key {
		t.Errorf("tls = %+v, want %s and %s", got, cert, key)
	}
	if cfg, err := Parse([]byte(`{"mcpServers": {"m": {"command": "m"}}}`), nil); err != nil || cfg.Gateway.TLS != nil {
		t.Errorf("default: %v %+v, want no tls block", err, cfg.Gateway.TLS)
	}
}

// TestTLSProblems: every problem of a tls block names its key and, for a
// file, the file.
func TestTLSProblems(t *testing.T) {
	dir := t.TempDir()
	cert, key := testkit.WriteCert(t, dir, "a", "127.0.0.1")
	_, otherKey := testkit.WriteCert(t, dir, "b", "127.0.0.1")
	missing := filepath.Join(dir, "missing.crt")
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, c := range []struct{ tls, want string }{
		{`{}`, `gateway.tls.certFile: is required`},
		{`{"certFile": ` + q(cert) + `}`, `gateway.tls.keyFile: is required`},
		{`{"certFile": ` + q(missing) + `, "keyFile": ` + q(key) + `}`, `gateway.tls.certFile: cannot read "` + missing + `": no such file or directory`},
		{`{"certFile": ` + q(cert) + `, "keyFile": ` + q(otherKey) + `}`, `gateway.tls: certFile "` + cert + `" and keyFile "` + otherKey + `" are not a PEM certificate and its private key`},
		{`{"certFile": ` + q(key) + `, "keyFile": ` + q(key) + `}`, `gateway.tls: certFile`},
		{`{"certFile": ` + q(cert) + `, "keyFile": ` + q(key) + `, "cert": "x"}`, `gateway.tls.cert`},
		{`"on"`, `gateway.tls: must be an object`},
	} {
		_, err := Parse([]byte(`{"mcpServers": {"m": {"command": "m"}}, "gateway": {"tls": `+c.tls+`}}`), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tls %s: %v, want %q", c.tls, err, c.want)
		}
	}
}
