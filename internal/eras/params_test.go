package eras

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

func TestParamHeaders(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   string // fmt of the headers, or "error"
	}{
		{`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"query":{"type":"string"}}}`, `[{Region [region]}]`},
		{`{"type":"object","properties":{"b":{"type":"integer","x-mcp-header":"B"},"a":{"type":"boolean","x-mcp-header":"A"}}}`, `[{A [a]} {B [b]}]`},
		{`{"type":"object","properties":{"loc":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}}}}`, `[{Zone [loc zone]}]`},
		{`{"type":"object"}`, `[]`},
		{`true`, `[]`},
		{`{"type":"object","properties":{"x":true}}`, `[]`},
		{`{"properties":{"v":{"type":"string","x-mcp-header":""}}}`, "error"},
		{`{"properties":{"v":{"type":"string","x-mcp-header":"My Region"}}}`, "error"},
		{`{"properties":{"v":{"type":"string","x-mcp-header":"Region:1"}}}`, "error"},
		{`{"properties":{"v":{"type":"string","x-mcp-header":"Région"}}}`, "error"},
		{`{"properties":{"v":{"type":"string","x-mcp-header":7}}}`, "error"},
		{`{"properties":{"v":{"type":"number","x-mcp-header":"Score"}}}`, "error"},
		{`{"properties":{"v":{"type":"object","x-mcp-header":"Data"}}}`, "error"},
		{`{"properties":{"v":{"type":["string","null"],"x-mcp-header":"V"}}}`, "error"},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"MyField"},"b":{"type":"string","x-mcp-header":"myfield"}}}`, "error"},
	} {
		got, err := ParamHeaders([]byte(tc.schema))
		if tc.want == "error" {
			if !errors.Is(err, ErrParamAnnotation) {
				t.Errorf("%s: %v, %v; want ErrParamAnnotation", tc.schema, got, err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tc.want && !(tc.want == "[]" && len(got) == 0) {
			t.Errorf("%s: %v, %v; want %s", tc.schema, got, err, tc.want)
		}
	}
}

func TestCheckParamHeaders(t *testing.T) {
	params := []ParamHeader{{"Region", []string{"region"}}, {"Priority", []string{"priority"}}, {"Verbose", []string{"verbose"}}, {"Zone", []string{"loc", "zone"}}}
	for _, tc := range []struct {
		name    string
		headers map[string][]string
		args    string
		ok      bool
	}{
		{"all agree", map[string][]string{"Mcp-Param-Region": {"us-west1"}, "Mcp-Param-Priority": {"42"}, "Mcp-Param-Verbose": {"true"}, "Mcp-Param-Zone": {"b"}},
			`{"region":"us-west1","priority":42,"verbose":true,"loc":{"zone":"b"}}`, true},
		{"integer compared as a number", map[string][]string{"Mcp-Param-Priority": {"42.0"}}, `{"priority":42}`, true},
		{"absent and null values need no header", nil, `{"region":null,"query":"x"}`, true},
		{"no arguments", nil, ``, true},
		{"base64 form", map[string][]string{"Mcp-Param-Region": {"=?base64?SGVsbG8=?="}}, `{"region":"Hello"}`, true},
		{"literal without the suffix", map[string][]string{"Mcp-Param-Region": {"=?base64?SGVsbG8="}}, `{"region":"=?base64?SGVsbG8="}`, true},
		{"surrounding blanks are not the value", map[string][]string{"Mcp-Param-Region": {"  us  "}}, `{"region":"us"}`, true},
		{"unannotated headers ignored", map[string][]string{"Mcp-Param-Other": {"x"}}, `{}`, true},
		{"missing header", nil, `{"region":"us-west1"}`, false},
		{"missing nested header", nil, `{"loc":{"zone":"b"}}`, false},
		{"header without value", map[string][]string{"Mcp-Param-Region": {"us"}}, `{}`, false},
		{"different value", map[string][]string{"Mcp-Param-Region": {"eu"}}, `{"region":"us"}`, false},
		{"repeated header", map[string][]string{"Mcp-Param-Region": {"us", "us"}}, `{"region":"us"}`, false},
		{"bad base64 padding", map[string][]string{"Mcp-Param-Region": {"=?base64?SGVsbG8?="}}, `{"region":"Hello"}`, false},
		{"bad base64 chars", map[string][]string{"Mcp-Param-Region": {"=?base64?SGVs!!!bG8=?="}}, `{"region":"Hello"}`, false},
		{"boolean spelled otherwise", map[string][]string{"Mcp-Param-Verbose": {"True"}}, `{"verbose":true}`, false},
		{"integer not a JSON number", map[string][]string{"Mcp-Param-Priority": {"0x2a"}}, `{"priority":42}`, false},
		{"integer other", map[string][]string{"Mcp-Param-Priority": {"41"}}, `{"priority":42}`, false},
		{"string header for a number value", map[string][]string{"Mcp-Param-Region": {"1"}}, `{"region":1}`, true},
		{"object value", map[string][]string{"Mcp-Param-Region": {"{}"}}, `{"region":{}}`, false},
	} {
		h := http.Header{}
		for k, vs := range tc.headers {
			for _, v := range vs {
				h.Add(k, v)
			}
		}
		var args []byte
		if tc.args != "" {
			args = []byte(tc.args)
		}
		p := CheckParamHeaders(h, params, args)
		if (p == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, p, tc.ok)
		}
		if p != nil && (p.Status != http.StatusBadRequest || p.Code != protocol.CodeHeaderMismatch) {
			t.Errorf("%s: %v, want 400 and %d", tc.name, p, protocol.CodeHeaderMismatch)
		}
	}
}

// FuzzParamHeaders: any schema gives annotations whose names are tokens
// and unique, or an error, never a panic; and checking any arguments and
// header against them never panics.
func FuzzParamHeaders(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"object","properties":{"z":{"type":"integer","x-mcp-header":"Z"}}}}}`), []byte(`{"region":"us","n":{"z":3}}`), "us")
	f.Add([]byte(`{"properties":{"v":{"x-mcp-header":"V"}}}`), []byte(`{"v":1e999}`), "=?base64?MQ==?=")
	f.Fuzz(func(t *testing.T, schema, args []byte, header string) {
		params, err := ParamHeaders(schema)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		h := http.Header{}
		for _, p := range params {
			if p.Name == "" || len(p.Path) == 0 || seen[http.CanonicalHeaderKey(p.Name)] {
				t.Fatalf("bad annotation %+v of %s", p, schema)
			}
			seen[http.CanonicalHeaderKey(p.Name)] = true
			h.Set(ParamHeaderPrefix+p.Name, header)
		}
		if p := CheckParamHeaders(h, params, args); p != nil && p.Code != protocol.CodeHeaderMismatch {
			t.Fatalf("problem %v", p)
		}
	})
}
