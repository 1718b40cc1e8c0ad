package config

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// Limits is the "gateway.limits" block: limits per principal (an API
// key's name, a token's subject; with no credentials, one anonymous
// principal for all), and one for the whole gateway (MaxInFlightTotal).
// Nil (the default): none. A zero field is no limit.
type Limits struct {
	// RequestsPerSecond is the rate of POSTs per principal (key
	// "requestsPerSecond"; a batch is one), with bursts of Burst (key
	// "burst"; default max(1, ceil(requestsPerSecond))).
	RequestsPerSecond float64
	Burst             int
	// MaxInFlight is the most POSTs of one principal answered at once
	// (key "maxInFlight").
	MaxInFlight int
	// MaxSessions is the most live sessions of one principal (key
	// "maxSessions").
	MaxSessions int
	// ToolsPerSecond is the rate of tools/call requests per principal and
	// tool name (key "toolsPerSecond"), with bursts of ToolBurst (key
	// "toolBurst"; default max(1, ceil(toolsPerSecond))).
	ToolsPerSecond float64
	ToolBurst      int
	// MaxInFlightTotal is the most POSTs of all principals together
	// answered at once (key "maxInFlightTotal"): past it, 503 with
	// Retry-After. It counts every POST to a target, of either era and
	// of the stateless revision; a legacy /messages POST until its
	// replies are on its session's SSE stream.
	MaxInFlightTotal int
}

// Audit is the "gateway.audit" block: one JSON line per client request.
// Nil (the default): no audit log.
type Audit struct {
	// File is where lines go (key "file"), required: a path (appended
	// to, created 0600), or "-" for stderr.
	File string
	// Arguments adds tools' and prompts' arguments to the lines (key
	// "arguments"). Default false.
	Arguments bool
}

// limits decodes "gateway.limits".
func (d *decoder) limits(path string, raw json.RawMessage, dst **Limits) {
	l := &Limits{}
	if d.fields(path, raw, "an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "requestsPerSecond":
			d.number(p, v, &l.RequestsPerSecond)
		case "burst":
			d.integer(p, v, &l.Burst)
		case "maxInFlight":
			d.integer(p, v, &l.MaxInFlight)
		case "maxSessions":
			d.integer(p, v, &l.MaxSessions)
		case "toolsPerSecond":
			d.number(p, v, &l.ToolsPerSecond)
		case "toolBurst":
			d.integer(p, v, &l.ToolBurst)
		case "maxInFlightTotal":
			d.integer(p, v, &l.MaxInFlightTotal)
		default:
			return false
		}
		return true
	}) {
		*dst = l
	}
}

// audit decodes "gateway.audit".
func (d *decoder) audit(path string, raw json.RawMessage, dst **Audit) {
	a := &Audit{}
	if d.fields(path, raw, `an object like {"file": "/var/log/mcpgate/audit.jsonl"}`, func(key, p string, v json.RawMessage) bool {
		switch key {
		case "file":
			d.str(p, v, &a.File, true)
		case "arguments":
			d.boolean(p, v, &a.Arguments)
		default:
			return false
		}
		return true
	}) {
		*dst = a
	}
}

// number decodes a finite JSON number.
func (d *decoder) number(path string, raw json.RawMessage, dst *float64) {
	if c := kind(raw); c != '-' && (c < '0' || c > '9') {
		d.problems.add(path, "must be a number")
		return
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		d.problems.add(path, "%s is not a usable number", raw)
		return
	}
	*dst = f
}

// checkLimits records problems with the limits and audit blocks.
func (g *Gateway) checkLimits(ps *Problems, path string) {
	if l := g.Limits; l != nil {
		p := join(path, "limits")
		for _, f := range []struct {
			key string
			v   float64
		}{
			{"requestsPerSecond", l.RequestsPerSecond}, {"burst", float64(l.Burst)},
			{"maxInFlight", float64(l.MaxInFlight)}, {"maxSessions", float64(l.MaxSessions)},
			{"toolsPerSecond", l.ToolsPerSecond}, {"toolBurst", float64(l.ToolBurst)},
			{"maxInFlightTotal", float64(l.MaxInFlightTotal)},
		} {
			if f.v < 0 {
				ps.add(join(p, f.key), "must not be negative (leave it out for no limit)")
			}
		}
		if l.Burst > 0 && l.RequestsPerSecond == 0 {
			ps.add(join(p, "burst"), `needs "requestsPerSecond"`)
		}
		if l.ToolBurst > 0 && l.ToolsPerSecond == 0 {
			ps.add(join(p, "toolBurst"), `needs "toolsPerSecond"`)
		}
		if l.RequestsPerSecond == 0 && l.MaxInFlight == 0 && l.MaxSessions == 0 && l.ToolsPerSecond == 0 && l.MaxInFlightTotal == 0 {
			ps.add(p, `sets no limit: give "requestsPerSecond", "maxInFlight", "maxSessions", "toolsPerSecond" or "maxInFlightTotal" (or remove "limits")`)
		}
	}
	if a := g.Audit; a != nil && a.File == "" {
		ps.add(join(join(path, "audit"), "file"), `required: a file path, or "-" for stderr`)
	}
}
