package config

import "encoding/json"

// serverField decodes one key of a server entry; it reports whether the key
// is known.
func (d *decoder) serverField(key, p string, v json.RawMessage, s *Server) bool {
	switch key {
	case "type":
		d.str(p, v, &s.Type, false)
	case "command":
		d.str(p, v, &s.Command, true)
	case "args":
		d.strs(p, v, &s.Args, true)
	case "env":
		d.strMap(p, v, &s.Env)
	case "cwd":
		d.str(p, v, &s.Cwd, true)
	case "url":
		d.str(p, v, &s.URL, true)
	case "headers":
		d.strMap(p, v, &s.Headers)
	case "principalHeaders":
		d.principalHeaders(p, v, &s.PrincipalHeaders)
	case "isolation":
		iso := string(s.Isolation)
		d.str(p, v, &iso, false)
		s.Isolation = Isolation(iso)
	case "timeout":
		d.timeout(p, v, &s.Timeout)
	case "maxInFlight":
		d.integer(p, v, &s.MaxInFlight)
	case "prewarm":
		d.integer(p, v, &s.Prewarm)
	case "roots":
		d.roots(p, v, &s.Roots)
	case "maxLineBytes":
		d.integer(p, v, &s.MaxLineBytes)
	case "inheritEnv":
		d.strs(p, v, &s.InheritEnv, false)
	case "critical":
		d.boolean(p, v, &s.Critical)
	case "initTimeout":
		d.duration(p, v, &s.InitTimeout)
	case "pingInterval":
		d.duration(p, v, &s.PingInterval)
	case "stdinTimeout":
		d.duration(p, v, &s.StdinTimeout)
	case "maxProcesses":
		d.integer(p, v, &s.MaxProcesses)
	case "processes":
		// 0 is written by a user here, not a literal Server's default:
		// refused now (Validate reads 0 as 1).
		if d.integer(p, v, &s.Processes) && s.Processes == 0 {
			d.problems.add(p, "must be from 1 to %d, not 0", MaxPoolProcesses)
		}
	case "stderrBytesPerSec":
		d.integer(p, v, &s.StderrBytesPerSec)
	case "stderrLevel":
		d.str(p, v, &s.StderrLevel, false)
	case "protocol":
		d.str(p, v, &s.Protocol, false)
	case "prefix":
		d.str(p, v, &s.Prefix, false)
	case "tools":
		d.globs(p, v, &s.Tools)
	case "prompts":
		d.globs(p, v, &s.Prompts)
	case "resources":
		d.globs(p, v, &s.Resources)
	case "auth":
		d.targetAuth(p, v, &s.Auth)
	case "policy":
		d.policy(p, v, &s.Policy)
	default:
		return false
	}
	return true
}

// roots decodes an array of {"uri", "name"} objects.
func (d *decoder) roots(path string, raw json.RawMessage, dst *[]Root) {
	elems, ok := array(raw)
	if !ok {
		d.problems.add(path, `must be an array of objects like {"uri": "file:///path"}`)
		return
	}
	roots := make([]Root, 0, len(elems))
	for i, e := range elems {
		var r Root
		if d.fields(index(path, i), e, "an object", func(key, p string, v json.RawMessage) bool {
			switch key {
			case "uri":
				d.str(p, v, &r.URI, true)
			case "name":
				d.str(p, v, &r.Name, false)
			default:
				return false
			}
			return true
		}) {
			roots = append(roots, r)
		}
	}
	*dst = roots
}
