package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseLimitsAudit(t *testing.T) {
	file := `{"mcpServers": {"memory": {"command": "m"}},
	  "gateway": {
	    "limits": {"requestsPerSecond": 2.5, "burst": 10, "maxInFlight": 4, "maxSessions": 3, "toolsPerSecond": 0.5, "toolBurst": 2, "maxInFlightTotal": 100},
	    "audit": {"file": "${LOGS}/audit.jsonl", "arguments": true}
	  }}`
	cfg, err := Parse([]byte(file), fakeEnv(map[string]string{"LOGS": "/var/log/mcpgate"}))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	wantL := &Limits{RequestsPerSecond: 2.5, Burst: 10, MaxInFlight: 4, MaxSessions: 3, ToolsPerSecond: 0.5, ToolBurst: 2, MaxInFlightTotal: 100}
	if !reflect.DeepEqual(cfg.Gateway.Limits, wantL) {
		t.Errorf("limits %+v, want %+v", cfg.Gateway.Limits, wantL)
	}
	wantA := &Audit{File: "/var/log/mcpgate/audit.jsonl", Arguments: true}
	if !reflect.DeepEqual(cfg.Gateway.Audit, wantA) {
		t.Errorf("audit %+v, want %+v", cfg.Gateway.Audit, wantA)
	}
	// Off by default, and with null.
	for _, f := range []string{`{"mcpServers": {"memory": {"command": "m"}}}`,
		`{"mcpServers": {"memory": {"command": "m"}}, "gateway": {"limits": null, "audit": null}}`} {
		cfg, err := Parse([]byte(f), fakeEnv(nil))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if cfg.Gateway.Limits != nil || cfg.Gateway.Audit != nil {
			t.Errorf("%s: limits %+v, audit %+v; want none", f, cfg.Gateway.Limits, cfg.Gateway.Audit)
		}
	}
}

func TestParseLimitsAuditProblems(t *testing.T) {
	gw := func(block string) string {
		return `{"mcpServers": {"memory": {"command": "m"}}, "gateway": {` + block + `}}`
	}
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"limits type", gw(`"limits": 5`), []string{`gateway.limits: must be an object`}},
		{"limits unknown key", gw(`"limits": {"maxInFlight": 1, "rps": 5}`), []string{`gateway.limits.rps: unknown key`}},
		{"rate not a number", gw(`"limits": {"requestsPerSecond": "5"}`), []string{`gateway.limits.requestsPerSecond: must be a number`}},
		{"burst not an integer", gw(`"limits": {"requestsPerSecond": 1, "burst": 1.5}`), []string{`gateway.limits.burst: must be an integer, not 1.5`}},
		{"negative", gw(`"limits": {"requestsPerSecond": -1, "maxInFlight": -2, "maxSessions": 1}`), []string{
			`gateway.limits.maxInFlight: must not be negative (leave it out for no limit)`,
			`gateway.limits.requestsPerSecond: must not be negative (leave it out for no limit)`,
		}},
		{"burst without rate", gw(`"limits": {"burst": 5, "maxSessions": 1}`), []string{`gateway.limits.burst: needs "requestsPerSecond"`}},
		{"tool burst without rate", gw(`"limits": {"toolBurst": 5, "maxSessions": 1}`), []string{`gateway.limits.toolBurst: needs "toolsPerSecond"`}},
		{"no limit", gw(`"limits": {}`), []string{
			`gateway.limits: sets no limit: give "requestsPerSecond", "maxInFlight", "maxSessions", "toolsPerSecond" or "maxInFlightTotal" (or remove "limits")`}},
		{"global cap alone", gw(`"limits": {"maxInFlightTotal": 1.5}`), []string{`gateway.limits.maxInFlightTotal: must be an integer, not 1.5`}},
		{"global cap negative", gw(`"limits": {"maxInFlightTotal": -1}`), []string{
			`gateway.limits.maxInFlightTotal: must not be negative (leave it out for no limit)`}},
		{"audit type", gw(`"audit": "-"`), []string{`gateway.audit: must be an object like {"file": "/var/log/mcpgate/audit.jsonl"}`}},
		{"audit file required", gw(`"audit": {"arguments": true}`), []string{`gateway.audit.file: required: a file path, or "-" for stderr`}},
		{"audit arguments type", gw(`"audit": {"file": "-", "arguments": "yes"}`), []string{`gateway.audit.arguments: must be true or false`}},
		{"audit unknown key", gw(`"audit": {"file": "-", "path": "x"}`), []string{`gateway.audit.path: unknown key`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.file), fakeEnv(nil))
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Parse = %+v, %v; want problems %q", cfg, err, tt.want)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems\n %s\nwant\n %s", strings.Join(got, "\n "), strings.Join(tt.want, "\n "))
			}
		})
	}
}
