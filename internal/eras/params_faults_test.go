package eras

import (
	"encoding/json"
	"net/http"
	"testing"
)

// Arguments a server reads otherwise than the gateway checks them: each
// call's header says what the gateway read, and the server would use
// another value. On the old code all of these passed: the gateway read
// "region" exactly (a Go server with encoding/json reads the last member
// named so in any case: "eu"), the last of a duplicate, and integers as
// float64 (a Python server's exact 9007199254740993 is not the header's
// 9007199254740992).
func TestCheckParamHeadersReadsAsEveryServer(t *testing.T) {
	params := []ParamHeader{{"Region", []string{"region"}}, {"Zone", []string{"loc", "zone"}}, {"N", []string{"n"}}}
	for _, tc := range []struct {
		name, header, value, args string
		ok                        bool
	}{
		{"another case after", "Mcp-Param-Region", "us", `{"region":"us","Region":"eu"}`, false},
		{"another case before", "Mcp-Param-Region", "us", `{"REGION":"eu","region":"us"}`, false},
		{"named twice", "Mcp-Param-Region", "eu", `{"region":"us","region":"eu"}`, false},
		{"nested, another case", "Mcp-Param-Zone", "b", `{"loc":{"zone":"b","Zone":"c"}}`, false},
		{"path object in another case", "Mcp-Param-Zone", "b", `{"loc":{"zone":"b"},"Loc":{"zone":"c"}}`, false},
		{"another case only", "Mcp-Param-Region", "eu", `{"Region":"eu"}`, false},
		{"another case only, no header", "Mcp-Param-Other", "x", `{"Region":"eu"}`, false},
		{"integer past float64", "Mcp-Param-N", "9007199254740992", `{"n":9007199254740993}`, false},
		{"long fraction", "Mcp-Param-N", "0.1", `{"n":0.1000000000000000000001}`, false},
		// What must still agree.
		{"other members in other cases", "Mcp-Param-Region", "us", `{"region":"us","Other":1,"other":2}`, true},
		{"integer exactly", "Mcp-Param-N", "9007199254740993", `{"n":9007199254740993}`, true},
		{"integer as a decimal", "Mcp-Param-N", "42.0", `{"n":42}`, true},
		{"exponent", "Mcp-Param-N", "1e2", `{"n":100}`, true},
		{"escaped member name", "Mcp-Param-Region", "us", `{"r\u0065gion":"us"}`, true},
	} {
		h := http.Header{}
		h.Set(tc.header, tc.value)
		if p := CheckParamHeaders(h, params, []byte(tc.args)); (p == nil) != tc.ok {
			t.Errorf("%s: %s with %s=%s: %v, want ok %v", tc.name, tc.args, tc.header, tc.value, p, tc.ok)
		}
	}
}

// FuzzCheckParamHeadersExact: whatever the arguments, when a header for
// "region" is accepted, a server reading exact names and one reading with
// encoding/json's case-insensitive rule get the same value (or none).
func FuzzCheckParamHeadersExact(f *testing.F) {
	f.Add([]byte(`{"region":"us"}`), "us")
	f.Add([]byte(`{"region":"us","Region":"eu"}`), "us")
	f.Add([]byte(`{"region":1,"region":2}`), "2")
	params := []ParamHeader{{"Region", []string{"region"}}}
	f.Fuzz(func(t *testing.T, args []byte, value string) {
		h := http.Header{}
		h.Set("Mcp-Param-Region", value)
		if CheckParamHeaders(h, params, args) != nil {
			return
		}
		var exact map[string]json.RawMessage
		var loose struct {
			Region json.RawMessage `json:"region"`
		}
		if json.Unmarshal(args, &exact) != nil || json.Unmarshal(args, &loose) != nil {
			return // not JSON to encoding/json: no server reads it
		}
		v := exact["region"]
		if string(v) != string(loose.Region) {
			t.Fatalf("%s with %q accepted: exact %s, encoding/json %s", args, value, v, loose.Region)
		}
	})
}
