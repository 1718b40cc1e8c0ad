package eras

import (
	"net/http"
	"strings"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file reads MCP-Protocol-Version the way real clients send it, which
// is not always one header line with one value: Claude Code 2.1 with the
// header also among its static headers sends "2025-11-25, 2025-11-25" (or
// two lines of it), and claude.ai's connectors relay 2026-07-28 requests
// under a "2025-11-25" header (anthropics/claude-code#93290). What is
// accepted is what has one reading only; everything else stays refused.

// HeaderVersion returns the version a request's MCP-Protocol-Version
// header names: its values on every line, split at commas (the list
// syntax of RFC 9110 §5.6.1, which lets a proxy fold repeated lines into
// one), trimmed of spaces and tabs, empty elements ignored (as that
// section asks). repeated is true when the one version came more than
// once. ok is false when the values differ: which of them an intermediary
// acted on cannot be known. A request without the header (or with only
// empty values) gives "", false, true. It does not allocate.
func HeaderVersion(h http.Header) (v string, repeated, ok bool) {
	n := 0
	for _, line := range h["Mcp-Protocol-Version"] { // canonical already: h.Values would allocate to canonicalize
		for rest, more := line, true; more; {
			var part string
			part, rest, more = strings.Cut(rest, ",")
			part = strings.Trim(part, " \t")
			switch {
			case part == "":
				continue
			case n == 0:
				v = part
			case part != v:
				return "", false, false
			}
			n++
		}
	}
	return v, n > 1, true
}

// olderHeader reports whether a request whose body names version body may
// carry header instead, for the body to decide: the body names a modern
// version and the header an initialized-era one. A session-era client's
// transport sets that header; its request is a modern one all the same.
// A header naming any other version (unknown, or modern and different) is
// still a mismatch, as the conformance suite checks.
func olderHeader(header, body string) bool {
	return protocol.IsStatelessVersion(body) && protocol.IsSessionVersion(header)
}
