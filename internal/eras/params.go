package eras

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file holds the rules of the Mcp-Param-{Name} headers
// (streamable-http.mdx, "Custom Headers from Tool Parameters"): a tool's
// inputSchema marks properties with "x-mcp-header", a client mirrors their
// values into headers, and a server that reads the body must refuse a
// request whose headers and arguments disagree (400, -32020). The gateway
// is such a server for every upstream: a stdio process never sees the
// headers.

// ParamHeaderPrefix starts every header mirroring a tool argument.
const ParamHeaderPrefix = "Mcp-Param-"

// ParamHeader is one "x-mcp-header" annotation of a tool's inputSchema:
// the header ParamHeaderPrefix+Name mirrors the argument at Path.
type ParamHeader struct {
	Name string   // the annotation's value, as the schema spells it
	Path []string // property names from the arguments object down
}

// ErrParamAnnotation is wrapped by the errors of [ParamHeaders]: the tool
// is invalid, and clients exclude it from their lists.
var ErrParamAnnotation = errors.New("modern: invalid x-mcp-header annotation")

// maxSchemaDepth bounds how deep ParamHeaders follows nested properties.
const maxSchemaDepth = 32

// ParamHeaders returns the x-mcp-header annotations of a tool's
// inputSchema (raw JSON), at any depth of "properties", in a stable order
// (sorted by path). An annotation that breaks a rule of the spec (not a
// string, empty, not an HTTP token, repeated case-insensitively, on a
// property whose type is not string, integer or boolean) makes the whole
// tool invalid: the error wraps ErrParamAnnotation. A schema that is not
// an object has none.
func ParamHeaders(inputSchema []byte) ([]ParamHeader, error) {
	var out []ParamHeader
	seen := map[string]bool{}
	if err := collectParams(inputSchema, nil, 0, seen, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func collectParams(schema []byte, path []string, depth int, seen map[string]bool, out *[]ParamHeader) error {
	if depth > maxSchemaDepth {
		return nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil // not an object schema: nothing to mirror
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		prop := s.Properties[name]
		p := append(path[:len(path):len(path)], name)
		var a struct {
			Header json.RawMessage `json:"x-mcp-header"`
			Type   json.RawMessage `json:"type"`
		}
		if json.Unmarshal(prop, &a) != nil {
			continue // a boolean schema (true/false) has no annotation
		}
		if a.Header != nil {
			h, err := paramAnnotation(a.Header, a.Type)
			if err != nil {
				return fmt.Errorf("%w: property %s: %v", ErrParamAnnotation, strings.Join(p, "."), err)
			}
			key := strings.ToLower(h)
			if seen[key] {
				return fmt.Errorf("%w: property %s: %q is used twice", ErrParamAnnotation, strings.Join(p, "."), h)
			}
			seen[key] = true
			*out = append(*out, ParamHeader{Name: h, Path: p})
		}
		if err := collectParams(prop, p, depth+1, seen, out); err != nil {
			return err
		}
	}
	return nil
}

// paramAnnotation checks one annotation's value and its property's type.
func paramAnnotation(raw, typ json.RawMessage) (string, error) {
	var h string
	if json.Unmarshal(raw, &h) != nil {
		return "", errors.New("not a string")
	}
	if h == "" {
		return "", errors.New("empty")
	}
	for i := 0; i < len(h); i++ {
		if !isTchar(h[i]) {
			return "", fmt.Errorf("%q is not an HTTP field-name token", h)
		}
	}
	var t string
	if typ != nil && json.Unmarshal(typ, &t) != nil {
		return "", errors.New("the property's type is not one primitive type")
	}
	switch t {
	case "", "string", "integer", "boolean":
	default:
		return "", fmt.Errorf("on a property of type %q (only string, integer, boolean)", t)
	}
	return h, nil
}

// isTchar reports an RFC 9110 tchar.
func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CheckParamHeaders applies the Mcp-Param rules of one tool's annotations
// to a tools/call: for each annotation, a header given with no value at
// its path (absent or null) is a mismatch, as is a value with no header,
// a header given twice, one whose =?base64?...?= form does not decode, or
// one that does not stand for the value (a string exactly, an integer
// numerically, a boolean as "true" or "false"). The answer is 400 and
// -32020, or nil when the headers and the arguments (raw JSON, nil when
// absent) agree. Headers of no annotation are ignored, as the spec has
// intermediaries do.
func CheckParamHeaders(h http.Header, params []ParamHeader, arguments []byte) *Problem {
	for _, ph := range params {
		name := ParamHeaderPrefix + ph.Name
		vs := h.Values(name)
		value, present, ambiguous := valueAt(arguments, ph.Path)
		switch {
		case ambiguous:
			return paramMismatch(fmt.Sprintf("arguments.%s is named twice, or in another case too: which would the server read?", strings.Join(ph.Path, ".")))
		case len(vs) > 1:
			return paramMismatch(fmt.Sprintf("%s header given %d times", name, len(vs)))
		case !present && len(vs) == 1:
			return paramMismatch(fmt.Sprintf("%s header given but arguments.%s has no value", name, strings.Join(ph.Path, ".")))
		case !present:
			continue
		case len(vs) == 0:
			return paramMismatch(fmt.Sprintf("missing %s header for arguments.%s", name, strings.Join(ph.Path, ".")))
		}
		decoded, err := DecodeHeaderValue(strings.Trim(vs[0], " \t"))
		if err != nil {
			return paramMismatch(fmt.Sprintf("%s header value '%s' is not valid =?base64?...?= encoding", name, clip(vs[0])))
		}
		if !headerStandsFor(decoded, value) {
			return paramMismatch(fmt.Sprintf("%s header value '%s' does not match arguments.%s", name, clip(vs[0]), strings.Join(ph.Path, ".")))
		}
	}
	return nil
}

func paramMismatch(msg string) *Problem {
	return &Problem{http.StatusBadRequest, protocol.CodeHeaderMismatch, "Header mismatch: " + msg, nil}
}

// valueAt returns the raw value at path in the arguments object, and
// whether it is there and not null. ambiguous reports an object on the
// path naming a member of it twice, or in another case ("Region", alone
// or beside "region"): a server decoding with Go's encoding/json reads the
// last of them whatever its case, one reading exact names the exact one
// or nothing, so no header (or its absence) can be said to stand for the
// value the server uses.
func valueAt(arguments []byte, path []string) (value json.RawMessage, present, ambiguous bool) {
	v := arguments
	for _, name := range path {
		var found bool
		var err error
		if v, found, ambiguous, err = argMember(v, name); err != nil || !found || ambiguous {
			return nil, false, ambiguous
		}
	}
	if len(v) == 0 || string(v) == "null" {
		return nil, false, false
	}
	return v, true, false
}

// argMember returns the value of obj's member name, read token by token:
// whether it is there, and whether it is ambiguous (see valueAt).
func argMember(obj []byte, name string) (value []byte, found, ambiguous bool, err error) {
	d := jsontext.NewDecoder(bytes.NewReader(obj), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return nil, false, false, errNotObject
	}
	seen := 0
	for d.PeekKind() != '}' {
		t, err := d.ReadToken()
		if err != nil {
			return nil, false, false, err
		}
		k := t.String() // before the next read voids t
		v, err := d.ReadValue()
		if err != nil {
			return nil, false, false, err
		}
		if strings.EqualFold(k, name) {
			seen++
			if k == name {
				value, found = bytes.Clone(v), true
			}
		}
	}
	return value, found, seen > 1 || seen == 1 && !found, nil
}

var errNotObject = errors.New("not a JSON object")

// headerStandsFor reports whether the decoded header value h stands for the
// JSON value v: a string equal to it, a number equal to it (compared as
// numbers: "42" and 42.0 agree), or "true"/"false" for a boolean.
func headerStandsFor(h string, v json.RawMessage) bool {
	switch v[0] {
	case '"':
		var s string
		return json.Unmarshal(v, &s) == nil && s == h
	case 't', 'f':
		return string(v) == h
	case '{', '[':
		return false // never mirrored: an annotation only goes on primitives
	}
	if h == "" || !(h[0] == '-' || h[0] >= '0' && h[0] <= '9') || !json.Valid([]byte(h)) {
		return false // JSON number syntax only: no "0x10", "Inf" or "NaN"
	}
	if len(v) <= maxExactNumber && len(h) <= maxExactNumber && !bytes.ContainsAny(v, "eE") && !strings.ContainsAny(h, "eE") {
		// Exactly: as float64, 9007199254740993 and 9007199254740992
		// agree, and a server with exact integers (Python's) would use
		// the one the header does not say.
		bv, ok1 := new(big.Rat).SetString(string(v))
		hv, ok2 := new(big.Rat).SetString(h)
		return ok1 && ok2 && bv.Cmp(hv) == 0
	}
	bv, err1 := strconv.ParseFloat(string(v), 64)
	hv, err2 := strconv.ParseFloat(h, 64)
	return err1 == nil && err2 == nil && !math.IsInf(bv, 0) && bv == hv
}

// maxExactNumber bounds the numbers compared exactly (without an
// exponent, whose digits a client could make cost without end).
const maxExactNumber = 400
