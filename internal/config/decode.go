package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Load reads the config file at path and parses it with the process
// environment. A read error names the file; a bad file gives [Problems].
func Load(path string) (*Config, error) {
	return LoadWith(path, Options{})
}

// LoadWith is Load with options: opts.Path is set to path, and
// opts.LookupEnv defaults to the process environment.
func LoadWith(path string, opts Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	opts.Path = path
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	return ParseWith(data, opts)
}

// Parse decodes and validates a config file. lookupEnv resolves ${VAR}
// references (nil means no variable is set).
//
// On any error it returns nil and [Problems] holding every problem found,
// sorted by path. Otherwise every field the file does not set holds its
// default, and servers inherit timeout and maxLineBytes from the gateway
// block.
func Parse(data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return ParseWith(data, Options{LookupEnv: lookupEnv})
}

// ParseWith is Parse with options (formats.go): the file's path, which
// the editor variables and envFile are relative to, and the Claude Code
// project to select.
func ParseWith(data []byte, opts Options) (*Config, error) {
	lookupEnv := opts.LookupEnv
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	// Editors on Windows may save with a byte order mark; JSON forbids it.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return nil, Problems{syntaxProblem(data, err)}
	}
	top, ok := members(data)
	if !ok {
		return nil, Problems{{Msg: "the config must be a JSON object"}}
	}

	d := &decoder{lookupEnv: lookupEnv}
	d.editor.file = opts.Path
	cfg := Default()
	t := d.topLevel(top)
	// The gateway block first: servers inherit some of its values.
	if t.gateway != nil && !isNull(t.gateway) {
		d.gateway("gateway", t.gateway, cfg)
	}
	d.serverSources(t, opts, cfg)
	d.addDefaultEndpoint(cfg)
	linkSecrets(cfg)
	cfg.Notes = d.editor.notes

	ps := d.problems
	// A path that failed to decode already has its problem; validating the
	// default left in its place would only repeat it.
	// Likewise "no servers configured" when the entries were there but bad,
	// and "configures no credentials" when the auth block's were (and
	// "sets no limit" when the limits' were).
	reported := make(map[string]bool, len(ps))
	for _, p := range ps {
		reported[p.Path] = true
		if d.underServers(p.Path) {
			reported[d.editor.root] = true
		}
		if strings.HasPrefix(p.Path, "gateway.auth.") {
			reported["gateway.auth"] = true
		}
		if strings.HasPrefix(p.Path, "gateway.limits.") {
			reported["gateway.limits"] = true
		}
	}
	for _, p := range cfg.problems() {
		p.Path = d.filePath(p.Path)
		if !reported[p.Path] {
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		ps.sort()
		return nil, ps
	}
	return cfg, nil
}

// syntaxProblem turns a JSON syntax error into a Problem that gives the
// line and column (1-based) where it was found.
func syntaxProblem(data []byte, err error) Problem {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return Problem{Msg: "invalid JSON: " + err.Error()}
	}
	// Offset counts the bytes read, including the offending one, except at
	// the end of the input, where there is no offending byte.
	off := min(int(se.Offset), len(data))
	if off > 0 && se.Error() != "unexpected end of JSON input" {
		off--
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	// Columns count characters, as editors do.
	col := 1 + utf8.RuneCount(data[bytes.LastIndexByte(data[:off], '\n')+1:off])
	return Problem{Msg: fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se)}
}

// decoder decodes JSON values into config fields, collecting a problem for
// each value it cannot use and leaving the field's default in place.
type decoder struct {
	lookupEnv func(string) (string, bool)
	problems  Problems
	// noDefaultEndpoint: "gateway.endpoints.all" is false.
	noDefaultEndpoint bool
	// editor is what other clients' formats need (formats.go).
	editor editorState
}

// gateway decodes the "gateway" block at path into cfg.Gateway (and its
// "endpoints" into cfg.Endpoints).
func (d *decoder) gateway(path string, raw json.RawMessage, cfg *Config) {
	g := &cfg.Gateway
	var fileKeys []SealKey // gateway.sealKeyFile's
	d.fields(path, raw, "an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "listen":
			d.str(p, v, &g.Listen, true)
		case "allowedOrigins":
			d.strs(p, v, &g.AllowedOrigins, false)
		case "sessionIdleTimeout":
			d.duration(p, v, &g.SessionIdleTimeout)
		case "sessionSweepInterval":
			d.duration(p, v, &g.SessionSweepInterval)
		case "keepAliveInterval":
			d.duration(p, v, &g.KeepAliveInterval)
		case "drainTimeout":
			d.duration(p, v, &g.DrainTimeout)
		case "requestTimeout":
			d.duration(p, v, &g.RequestTimeout)
		case "maxSessions":
			d.integer(p, v, &g.MaxSessions)
		case "maxBodyBytes":
			d.int64(p, v, &g.MaxBodyBytes)
		case "sseReplayEvents":
			d.integer(p, v, &g.SSEReplayEvents)
		case "sseReplayBytes":
			d.int64(p, v, &g.SSEReplayBytes)
		case "sessionReplayBytes":
			d.int64(p, v, &g.SessionReplayBytes)
		case "headerTimeout":
			d.duration(p, v, &g.HeaderTimeout)
		case "bodyReadTimeout":
			d.duration(p, v, &g.BodyReadTimeout)
		case "replyWait":
			d.duration(p, v, &g.ReplyWait)
		case "inputWait":
			d.duration(p, v, &g.InputWait)
		case "idleTimeout":
			d.duration(p, v, &g.IdleTimeout)
		case "maxConnections":
			d.integer(p, v, &g.MaxConnections)
		case "allowedHosts":
			d.strs(p, v, &g.AllowedHosts, false)
		case "maxLineBytes":
			d.integer(p, v, &g.MaxLineBytes)
		case "logLevel":
			d.str(p, v, &g.LogLevel, false)
		case "logFormat":
			d.str(p, v, &g.LogFormat, false)
		case "hostRouting":
			d.fields(p, v, "an object", func(key, p string, v json.RawMessage) bool {
				if key != "domain" {
					return false
				}
				d.str(p, v, &g.HostRouting.Domain, true)
				return true
			})
		case "trustProxyHeaders":
			d.boolean(p, v, &g.TrustProxyHeaders)
		case "endpoints":
			d.endpoints(p, v, cfg)
		case "auth":
			d.auth(p, v, &g.Auth)
		case "limits":
			d.limits(p, v, &g.Limits)
		case "audit":
			d.audit(p, v, &g.Audit)
		case "metrics":
			d.boolean(p, v, &g.Metrics)
		case "admin":
			d.admin(p, v, &g.Admin)
		case "tls":
			d.tls(p, v, &g.TLS)
		case "secretsFile":
			d.secretsFile(p, v, g)
		case "sealKeys":
			d.sealKeys(p, v, &g.SealKeys, true)
		case "sealKeyFile":
			fileKeys = d.sealKeyFile(p, v, g)
		case "cluster":
			d.cluster(p, v, &g.Cluster) // cluster.go
		default:
			return false
		}
		return true
	})
	d.useSealKeyFile(join(path, "sealKeyFile"), g, fileKeys) // seal.go
}

// boolean decodes true or false.
func (d *decoder) boolean(path string, raw json.RawMessage, dst *bool) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		d.problems.add(path, "must be true or false")
	}
}

// servers decodes the object of servers at path ("mcpServers", or
// another client's key: formats.go) into cfg.Servers, or cfg.Disabled
// for an entry with "disabled": true. A name already there is replaced
// (a Claude Code project's servers win over the top-level ones).
func (d *decoder) servers(path string, raw json.RawMessage, cfg *Config) {
	d.object(path, raw, "an object of servers", false, func(name, p string, v json.RawMessage) bool {
		s := cfg.Gateway.NewServer(name)
		s.Type = "" // inferred below unless set
		var extra clientKeys
		if !d.fields(p, v, "an object", func(key, p string, v json.RawMessage) bool {
			return d.serverField(key, p, v, s) || d.clientField(key, p, v, s, &extra)
		}) {
			return true
		}
		if s.Type == "" {
			s.Type = TypeStdio
			if s.Command == "" && s.URL != "" {
				s.Type = TypeHTTP // a url-only entry, as some clients write
			}
		}
		d.finishServer(p, s, &extra)
		d.editor.paths[name] = p
		delete(cfg.Servers, name)
		delete(cfg.Disabled, name)
		if s.Disabled {
			cfg.Disabled[name] = s
		} else {
			cfg.Servers[name] = s
		}
		return true
	})
}

// fields walks the JSON object raw at path, calling field for each member
// that is not null: null leaves a field's default, as encoding/json does.
// field reports whether it knows the key; unknown and duplicate keys are
// problems. fields reports whether raw is an object (if not, the problem
// "must be WHAT" is recorded).
func (d *decoder) fields(path string, raw json.RawMessage, what string, field func(key, path string, v json.RawMessage) bool) bool {
	return d.object(path, raw, what, true, field)
}

// object is fields, with a choice to pass null members to field.
func (d *decoder) object(path string, raw json.RawMessage, what string, skipNull bool, field func(key, path string, v json.RawMessage) bool) bool {
	ms, ok := members(raw)
	if !ok {
		d.problems.add(path, "must be %s", what)
		return false
	}
	seen := make(map[string]bool, len(ms))
	for _, m := range ms {
		p := join(path, m.key)
		if seen[m.key] {
			d.problems.add(p, "duplicate key")
			continue
		}
		seen[m.key] = true
		if skipNull && isNull(m.val) {
			continue
		}
		if !field(m.key, p, m.val) {
			d.problems.add(p, "unknown key")
		}
	}
	return true
}

// str decodes a JSON string, expanding ${VAR} references if expandEnv.
func (d *decoder) str(path string, raw json.RawMessage, dst *string, expandEnv bool) bool {
	var s string
	if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		d.problems.add(path, "must be a string")
		return false
	}
	if expandEnv {
		s = d.expand(path, s)
	}
	*dst = s
	return true
}

// strs decodes an array of strings.
func (d *decoder) strs(path string, raw json.RawMessage, dst *[]string, expandEnv bool) {
	elems, ok := array(raw)
	if !ok {
		d.problems.add(path, "must be an array of strings")
		return
	}
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		var s string
		if d.str(index(path, i), e, &s, expandEnv) {
			out = append(out, s)
		}
	}
	*dst = out
}

// strMap decodes an object of strings, expanding ${VAR} in the values.
func (d *decoder) strMap(path string, raw json.RawMessage, dst *map[string]string) {
	out := map[string]string{}
	d.fields(path, raw, "an object of strings", func(key, p string, v json.RawMessage) bool {
		var s string
		if d.str(p, v, &s, true) {
			out[key] = s
		}
		return true
	})
	*dst = out
}

// integer decodes a JSON integer that fits in an int.
func (d *decoder) integer(path string, raw json.RawMessage, dst *int) bool {
	if c := kind(raw); c != '-' && (c < '0' || c > '9') {
		d.problems.add(path, "must be an integer")
		return false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, strconv.IntSize)
	if errors.Is(err, strconv.ErrRange) {
		d.problems.add(path, "%s is too large", raw)
		return false
	}
	if err != nil {
		d.problems.add(path, "must be an integer, not %s", raw)
		return false
	}
	*dst = int(n)
	return true
}

// int64 decodes a JSON integer into an int64 field.
func (d *decoder) int64(path string, raw json.RawMessage, dst *int64) {
	var n int
	if d.integer(path, raw, &n) {
		*dst = int64(n)
	}
}

// duration decodes a time.ParseDuration string such as "30s". Its hint on
// error is the value with an "s" added when the value is a bare number,
// else the field's current (default) value.
func (d *decoder) duration(path string, raw json.RawMessage, dst *time.Duration) {
	hint := formatDuration(*dst)
	var s string
	switch c := kind(raw); {
	case c == '"':
		if json.Unmarshal(raw, &s) != nil {
			break
		}
		v, err := time.ParseDuration(s)
		if err == nil {
			*dst = v
			return
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			hint = s + "s"
		}
		d.problems.add(path, "%q is not a duration (use e.g. %q)", s, hint)
		return
	case c == '-' || ('0' <= c && c <= '9'):
		d.problems.add(path, "%s is not a duration (use e.g. %q)", raw, string(raw)+"s")
		return
	}
	d.problems.add(path, "must be a duration string (e.g. %q)", hint)
}

// expand expands ${VAR} references in s, recording a problem at path for
// each one that cannot be expanded.
func (d *decoder) expand(path, s string) string {
	out, msgs := expand(s, d.lookupEnv, d.editorVar)
	for _, m := range msgs {
		d.problems.add(path, "%s", m)
	}
	return out
}

// formatDuration writes d as a user would: "5m", not "5m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// member is one key/value pair of a JSON object, in document order.
type member struct {
	key string
	val json.RawMessage
}

// members splits a valid JSON object into its members, keeping duplicates
// (which a map would silently merge). It reports false if raw is not an
// object.
func members(raw json.RawMessage) ([]member, bool) {
	if kind(raw) != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		ms = append(ms, member{key: key, val: v})
	}
	return ms, true
}

// array splits a JSON array into its elements.
func array(raw json.RawMessage) ([]json.RawMessage, bool) {
	var elems []json.RawMessage
	if kind(raw) != '[' || json.Unmarshal(raw, &elems) != nil {
		return nil, false
	}
	return elems, true
}

// kind returns the first byte of a JSON value, which tells its type.
func kind(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// isNull reports whether raw is the JSON literal null.
func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}
