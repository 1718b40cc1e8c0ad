package config

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// The keys other clients write in a server entry, besides the ones
// Claude Desktop writes (decode_server.go):
//
//   - "disabled": true (Cline, Roo, Cursor, Windsurf): the server is not
//     started (Config.Disabled).
//   - "disabledTools" (Cline, Roo, Windsurf): names of tools the user
//     turned off; added to "tools": {"deny": [...]} as exact names.
//   - "autoApprove" (Cline), "alwaysAllow" (Roo): tools the client runs
//     without asking its user. A gateway asks no one: accepted, ignored,
//     one Note for each list that is not empty.
//   - "envFile" (VS Code, Cursor): Server.EnvFile.
//   - "timeout" as a number (clientTimeout).
//   - "serverUrl" (Windsurf): "url".
//   - "type": "streamableHttp" (Cline) or "streamable-http" (Roo): "http".

// clientKeys collects the keys of an entry that are settled once the
// whole entry is read.
type clientKeys struct {
	disabledTools []string
	ignored       []string // key paths of keys accepted and ignored
}

// clientField decodes one of the other clients' keys of a server entry;
// it reports whether the key is one.
func (d *decoder) clientField(key, p string, v json.RawMessage, s *Server, extra *clientKeys) bool {
	switch key {
	case "disabled":
		d.boolean(p, v, &s.Disabled)
	case "disabledTools":
		d.strs(p, v, &extra.disabledTools, false)
	case "autoApprove", "alwaysAllow":
		var names []string
		d.strs(p, v, &names, false)
		if len(names) > 0 { // an empty list (Cline writes one) approves nothing: nothing is lost
			extra.ignored = append(extra.ignored, p)
		}
	case "envFile":
		d.str(p, v, &s.EnvFile, true)
	case "serverUrl":
		d.str(p, v, &s.URL, true)
	default:
		return false
	}
	return true
}

// finishServer applies what clientField collected for the entry at p.
func (d *decoder) finishServer(p string, s *Server, extra *clientKeys) {
	switch s.Type {
	case "streamableHttp", "streamable-http":
		s.Type = TypeHTTP
	}
	for _, name := range extra.disabledTools {
		s.Tools.Deny = append(s.Tools.Deny, literalPattern(name))
	}
	for _, kp := range extra.ignored {
		d.editor.notes = append(d.editor.notes, Note{Server: s.Name, Path: kp,
			Msg: "accepted and ignored: the gateway asks no one before a call (use \"policy\" to decide who may call what)"})
	}
	if s.EnvFile != "" {
		d.envFile(join(p, "envFile"), s)
	}
}

// literalPattern is a path.Match pattern matching exactly name: a tool
// the user disabled by name is that tool, even if its name has a '*'.
func literalPattern(name string) string {
	var b strings.Builder
	for _, c := range name {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// maxTimeoutSeconds is the largest number clientTimeout reads as seconds:
// Cline and Roo write their per-server "timeout" in seconds, from 1 to
// 3600 (their longest choice is an hour); other clients write
// milliseconds, as Cursor's and Windsurf's users copy them (60000).
const maxTimeoutSeconds = 3600

// timeout decodes a server's "timeout": a duration string ("30s", "5m"),
// or a JSON number (clientTimeout).
func (d *decoder) timeout(path string, raw json.RawMessage, dst *time.Duration) {
	if c := kind(raw); c != '-' && (c < '0' || c > '9') {
		d.duration(path, raw, dst)
		return
	}
	t, err := clientTimeout(string(bytes.TrimSpace(raw)))
	if err != "" {
		d.problems.add(path, "%s", err)
		return
	}
	*dst = t
}

// clientTimeout reads a number of another client's "timeout": up to 3600
// it is seconds (Cline's and Roo's unit: reading their 60 as 60 ms would
// time every request out), above it milliseconds ("timeout": 60000 is a
// minute). A number that is not a positive whole one is refused with the
// strings that say it without doubt.
func clientTimeout(num string) (time.Duration, string) {
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 || f != math.Trunc(f) || f > float64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, "must be a duration string such as \"60s\" or \"500ms\" (a number is whole seconds up to 3600, else milliseconds), not " + num
	}
	n := int64(f)
	if n <= maxTimeoutSeconds {
		return time.Duration(n) * time.Second, ""
	}
	return time.Duration(n) * time.Millisecond, ""
}

// checkDisabled records problems with the disabled entries, as with the
// others: enabling one later must not reveal a bad value.
func (c *Config) checkDisabled(ps *Problems) {
	for name, s := range c.Disabled {
		path := join("mcpServers", name)
		if s == nil {
			ps.add(path, "missing")
			continue
		}
		if _, dup := c.Servers[name]; dup {
			ps.add(path, "both enabled and disabled")
		}
		if !validServerName(name) {
			ps.add(path, "invalid server name %q (use only letters, digits, '.', '_' and '-': it appears in URLs)", name)
		}
		s.check(ps, path)
		s.checkFilters(ps, path)
	}
}
