package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
)

// This file holds per-principal upstream credentials: a remote server's
// "principalHeaders" (header templates filled in for the principal a
// session or stateless request is opened for) and the gateway's
// "secretsFile" they read from. Secret values never appear in a problem, an
// error or a String: they are named by principal and secret name only.

// Template is one "principalHeaders" value: literal text and placeholders
// {{principal}}, {{secret.NAME}} and {{claim.NAME}}. The zero Template
// expands to "".
type Template struct {
	parts []part
}

type partKind uint8

const (
	literal partKind = iota
	principalPart
	secretPart
	claimPart
)

// part is literal text, or a placeholder with the name it reads.
type part struct {
	kind partKind
	text string // the literal, or the secret or claim name
}

// placeholderHelp ends the problems of a malformed template.
const placeholderHelp = "write {{principal}}, {{secret.NAME}} or {{claim.NAME}}"

// ParseTemplate parses a header template. Its error never quotes literal
// text (which may hold a secret expanded from the environment), only the
// placeholder at fault.
func ParseTemplate(s string) (Template, error) {
	var t Template
	for s != "" {
		i := strings.Index(s, "{{")
		if i < 0 {
			t.parts = append(t.parts, part{kind: literal, text: s})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, part{kind: literal, text: s[:i]})
		}
		end := strings.Index(s[i+2:], "}}")
		if end < 0 {
			return Template{}, fmt.Errorf(`unterminated "{{" (%s)`, placeholderHelp)
		}
		ref := strings.TrimSpace(s[i+2 : i+2+end])
		s = s[i+2+end+2:]
		kind, name, dotted := strings.Cut(ref, ".")
		switch {
		case ref == "principal":
			t.parts = append(t.parts, part{kind: principalPart})
		case dotted && (kind == "secret" || kind == "claim") && name == "":
			return Template{}, fmt.Errorf("placeholder {{%s}} names no %s (%s)", ref, kind, placeholderHelp)
		case dotted && (kind == "secret" || kind == "claim") && strings.ContainsAny(name, "{} \t"):
			return Template{}, fmt.Errorf("placeholder {{%s}}: invalid %s name", ref, kind)
		case dotted && kind == "secret":
			t.parts = append(t.parts, part{kind: secretPart, text: name})
		case dotted && kind == "claim":
			t.parts = append(t.parts, part{kind: claimPart, text: name})
		default:
			return Template{}, fmt.Errorf("unknown placeholder {{%s}} (%s)", ref, placeholderHelp)
		}
	}
	return t, nil
}

// Secrets returns the secret names t reads, sorted, without duplicates.
func (t Template) Secrets() []string {
	var names []string
	for _, p := range t.parts {
		if p.kind == secretPart && !slices.Contains(names, p.text) {
			names = append(names, p.text)
		}
	}
	sort.Strings(names)
	return names
}

// String shows the placeholders of t, each literal as "…": literals may
// hold a secret expanded from the environment.
func (t Template) String() string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.kind {
		case literal:
			b.WriteString("…")
		case principalPart:
			b.WriteString("{{principal}}")
		case secretPart:
			b.WriteString("{{secret." + p.text + "}}")
		case claimPart:
			b.WriteString("{{claim." + p.text + "}}")
		}
	}
	return b.String()
}

// GoString is String, so that %#v redacts too.
func (t Template) GoString() string { return t.String() }

// Secrets is the content of gateway.secretsFile: per principal name, its
// secrets by name. It is read-only once loaded. Its String and GoString
// name the file and count principals; no value is ever formatted.
type Secrets struct {
	file   string
	values map[string]map[string]string // principal -> secret name -> value
}

// NewSecrets returns Secrets holding values (not copied), as if read from
// file (used in messages only). For configs built in code and tests.
func NewSecrets(file string, values map[string]map[string]string) *Secrets {
	return &Secrets{file: file, values: values}
}

// File returns the path the secrets were read from.
func (s *Secrets) File() string { return s.file }

// lookup returns the secret name of principal.
func (s *Secrets) lookup(principal, name string) (string, bool) {
	if s == nil {
		return "", false
	}
	v, ok := s.values[principal][name]
	return v, ok
}

// String names the file and counts principals, never a value.
func (s *Secrets) String() string {
	if s == nil {
		return "secrets(none)"
	}
	return fmt.Sprintf("secrets(%s: %d principals)", s.file, len(s.values))
}

// GoString is String, so that %#v redacts too.
func (s *Secrets) GoString() string { return s.String() }

// ReadSecrets reads a secrets file: a JSON object of principal name ->
// object of secret name -> string. Its error names the file and, for a
// bad member, the principal and secret names, never a value (nor a
// character of one: a syntax error gives only line and column).
func ReadSecrets(path string) (*Secrets, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("cannot read %q: %v", path, pe.Err)
		}
		return nil, fmt.Errorf("cannot read %q: %v", path, err)
	}
	return parseSecrets(path, data)
}

func parseSecrets(path string, data []byte) (*Secrets, error) {
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		line, col := 1, 1
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// As syntaxProblem, without the message: it quotes a character.
			off := min(int(se.Offset), len(data))
			if off > 0 && se.Error() != "unexpected end of JSON input" {
				off--
			}
			line = 1 + strings.Count(string(data[:off]), "\n")
			col = off - strings.LastIndexByte(string(data[:off]), '\n')
		}
		return nil, fmt.Errorf("%q: invalid JSON near line %d, column %d", path, line, col)
	}
	const shape = `must be a JSON object {"PRINCIPAL": {"SECRET_NAME": "value", ...}, ...}`
	principals, ok := members(data)
	if !ok {
		return nil, fmt.Errorf("%q: %s", path, shape)
	}
	var errs []string
	values := make(map[string]map[string]string, len(principals))
	for _, p := range principals {
		if _, dup := values[p.key]; dup {
			errs = append(errs, fmt.Sprintf("principal %q: duplicate key", p.key))
			continue
		}
		secrets, ok := members(p.val)
		if !ok {
			errs = append(errs, fmt.Sprintf("principal %q: must be an object of secret name -> string", p.key))
			continue
		}
		m := make(map[string]string, len(secrets))
		for _, s := range secrets {
			var v string
			switch _, dup := m[s.key]; {
			case dup:
				errs = append(errs, fmt.Sprintf("secret %q of principal %q: duplicate key", s.key, p.key))
			case kind(s.val) != '"' || json.Unmarshal(s.val, &v) != nil:
				errs = append(errs, fmt.Sprintf("secret %q of principal %q: must be a string", s.key, p.key))
			case badHeaderValue(v):
				errs = append(errs, fmt.Sprintf("secret %q of principal %q: contains a control character (CR, LF, NUL...)", s.key, p.key))
			default:
				m[s.key] = v
			}
		}
		values[p.key] = m
	}
	if errs != nil {
		return nil, fmt.Errorf("%q: %s", path, strings.Join(errs, "; "))
	}
	return &Secrets{file: path, values: values}, nil
}

// badHeaderValue reports whether v has a character no header value may
// carry (CR or LF would split the request).
func badHeaderValue(v string) bool {
	return strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f })
}

// secretsFile decodes "gateway.secretsFile" and reads the file.
func (d *decoder) secretsFile(path string, raw json.RawMessage, g *Gateway) {
	if !d.str(path, raw, &g.SecretsFile, true) || g.SecretsFile == "" {
		return
	}
	s, err := ReadSecrets(g.SecretsFile)
	if err != nil {
		d.problems.add(path, "%v", err)
		return
	}
	g.Secrets = s
}

// principalHeaders decodes a server's "principalHeaders": header name ->
// template (${VAR} expanded first).
func (d *decoder) principalHeaders(path string, raw json.RawMessage, dst *map[string]Template) {
	out := map[string]Template{}
	d.fields(path, raw, "an object of header name -> template", func(key, p string, v json.RawMessage) bool {
		var s string
		if !d.str(p, v, &s, true) {
			return true
		}
		t, err := ParseTemplate(s)
		if err != nil {
			d.problems.add(p, "%v", err)
			return true
		}
		out[key] = t
		return true
	})
	*dst = out
}

// linkSecrets gives every server the gateway's secrets.
func linkSecrets(cfg *Config) {
	for _, s := range cfg.Servers {
		if len(s.PrincipalHeaders) > 0 {
			s.Secrets = cfg.Gateway.Secrets
		}
	}
}

// checkPrincipalHeaders records problems with s's principalHeaders: on a
// server that is not remote, a header no request could carry, a literal
// with a control character, a secret without gateway.secretsFile.
func (s *Server) checkPrincipalHeaders(ps *Problems, path string, secretsFile string) {
	if len(s.PrincipalHeaders) == 0 {
		return
	}
	path = join(path, "principalHeaders")
	if !s.remote() {
		ps.add(path, `only used by "http" and "sse" servers`)
		return
	}
	for name, t := range s.PrincipalHeaders {
		p := join(path, name)
		switch {
		case !validHeaderName(name):
			ps.add(p, "invalid header name")
		case slices.Contains(transportHeaders, http.CanonicalHeaderKey(name)):
			ps.add(p, "set by the gateway's transport; remove it")
		case slices.ContainsFunc(t.parts, func(x part) bool { return x.kind == literal && badHeaderValue(x.text) }):
			ps.add(p, "value contains a control character (CR, LF, NUL...)")
		}
		if secrets := t.Secrets(); len(secrets) > 0 && secretsFile == "" && s.Secrets == nil {
			ps.add(p, "uses {{secret.%s}} but gateway.secretsFile is not set", secrets[0])
		}
	}
}

// ErrNoCredential is matched (errors.Is) by the error of
// [Server.UpstreamHeaders] when a placeholder cannot be filled for the
// principal.
var ErrNoCredential = errors.New("mcpgate: no upstream credential")

// CredentialError says which placeholder of which header could not be
// filled for which principal. It names secrets and claims, never values.
type CredentialError struct {
	Server    string
	Header    string
	Principal string // "" when anonymous
	Secret    string // the secret missing, if one is
	Claim     string // the claim missing or not a string, if one is
	Bad       bool   // the value is there but cannot be a header value
}

func (e *CredentialError) Error() string {
	switch {
	case e.Principal == "":
		return fmt.Sprintf("mcpgate: server %q needs an authenticated principal (its header %q is per principal)", e.Server, e.Header)
	case e.Bad:
		return fmt.Sprintf("mcpgate: server %q: header %q for principal %q would contain a control character", e.Server, e.Header, e.Principal)
	case e.Secret != "":
		return fmt.Sprintf("mcpgate: server %q needs secret %q for principal %q (header %q, gateway.secretsFile)", e.Server, e.Secret, e.Principal, e.Header)
	}
	return fmt.Sprintf("mcpgate: server %q needs string claim %q in the token of principal %q (header %q)", e.Server, e.Claim, e.Principal, e.Header)
}

func (e *CredentialError) Unwrap() error { return ErrNoCredential }

// HTTPStatus is the status of a request refused for it: 403, the client
// is known but this server cannot be used on its behalf (the HTTP front
// asks opening errors for one).
func (e *CredentialError) HTTPStatus() int { return 403 }

// UpstreamHeaders returns the headers of s's upstream requests for
// principal ("" when anonymous) with the token claims claims (nil for an
// API key): s.Headers with s.PrincipalHeaders expanded over them (a
// header of both, in any case, takes the expanded value). Without
// principalHeaders it returns s.Headers itself. An unfillable placeholder
// gives a *CredentialError; headers are tried in name order, so the error
// is the same every time.
func (s *Server) UpstreamHeaders(principal string, claims map[string]any) (map[string]string, error) {
	if len(s.PrincipalHeaders) == 0 {
		return s.Headers, nil
	}
	names := make([]string, 0, len(s.PrincipalHeaders))
	for name := range s.PrincipalHeaders {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]string, len(s.Headers)+len(names))
	for k, v := range s.Headers {
		out[http.CanonicalHeaderKey(k)] = v
	}
	for _, name := range names {
		v, err := s.PrincipalHeaders[name].expand(principal, claims, s.Secrets)
		if err != nil {
			err.Server, err.Header, err.Principal = s.Name, name, principal
			return nil, err
		}
		out[http.CanonicalHeaderKey(name)] = v
	}
	return out, nil
}

// expand fills t in for principal; its error has only the missing name set.
func (t Template) expand(principal string, claims map[string]any, secrets *Secrets) (string, *CredentialError) {
	if principal == "" {
		return "", &CredentialError{}
	}
	var b strings.Builder
	for _, p := range t.parts {
		switch p.kind {
		case literal:
			b.WriteString(p.text)
		case principalPart:
			b.WriteString(principal)
		case secretPart:
			v, ok := secrets.lookup(principal, p.text)
			if !ok {
				return "", &CredentialError{Secret: p.text}
			}
			b.WriteString(v)
		case claimPart:
			v, ok := claims[p.text].(string)
			if !ok {
				return "", &CredentialError{Claim: p.text}
			}
			b.WriteString(v)
		}
	}
	if badHeaderValue(b.String()) {
		return "", &CredentialError{Bad: true}
	}
	return b.String(), nil
}
