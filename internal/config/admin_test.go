package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseAdmin(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "ADMIN_TOKEN" {
			return "0123456789abcdef0123", true
		}
		return "", false
	}
	cfg, err := Parse([]byte(`{"mcpServers": {"m": {"command": "m"}},
	  "gateway": {"admin": {"token": "${ADMIN_TOKEN}", "scopes": ["ops"], "listen": "127.0.0.1:9090"}}}`), env)
	if err != nil {
		t.Fatal(err)
	}
	want := &Admin{Token: "0123456789abcdef0123", Scopes: []string{"ops"}, Listen: "127.0.0.1:9090"}
	if !reflect.DeepEqual(cfg.Gateway.Admin, want) {
		t.Errorf("admin = %+v, want %+v", cfg.Gateway.Admin, want)
	}

	cfg, err = Parse([]byte(`{"mcpServers": {"m": {"command": "m"}}, "gateway": {"admin": {"token": "0123456789abcdef"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Gateway.Admin; a == nil || !reflect.DeepEqual(a.Scopes, []string{"admin"}) || a.Listen != "" || a.ListenAddr() != "" {
		t.Errorf("defaults: %+v", a)
	}
	cfg, err = Parse([]byte(`{"mcpServers": {"m": {"command": "m"}}, "gateway": {"admin": null}}`), nil)
	if err != nil || cfg.Gateway.Admin != nil || cfg.Gateway.Admin.ListenAddr() != "" {
		t.Errorf("admin null: %v %+v", err, cfg)
	}
}

func TestAdminProblems(t *testing.T) {
	for _, c := range []struct{ admin, want string }{
		{`{}`, `gateway.admin: opens to nobody`},
		{`{"token": "short"}`, `gateway.admin.token: is too short`},
		{`{"token": "0123456789abcdef", "scopes": [""]}`, `gateway.admin.scopes: must not contain an empty scope`},
		{`{"token": "0123456789abcdef", "listen": "nope"}`, `gateway.admin.listen: "nope" is not host:port`},
		{`{"token": "0123456789abcdef", "listen": "127.0.0.1:8080"}`, `gateway.admin.listen: is gateway.listen`},
		{`{"token": "0123456789abcdef", "port": 1}`, `gateway.admin.port`},
	} {
		_, err := Parse([]byte(`{"mcpServers": {"m": {"command": "m"}}, "gateway": {"admin": `+c.admin+`}}`), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("admin %s: %v, want %q", c.admin, err, c.want)
		}
	}
}
