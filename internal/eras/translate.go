package eras

import (
	"strconv"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// ToSessionEra appends to dst the message to send to a session-era
// (initialized) server for msg, a modern message parsed by [jsonrpc.Parse]: params._meta
// without its io.modelcontextprotocol/* keys (escaped spellings included),
// and without _meta at all if nothing else was in it. Everything else,
// progressToken and other _meta keys among it, is copied byte for byte; a
// message with nothing to strip is copied whole.
//
// The keys go because they are this revision's per-request state, which a
// session-era server learnt once at initialize and may reject or misread.
func ToSessionEra(dst []byte, msg *jsonrpc.Message) []byte {
	b := msg.Raw
	params := msg.Params
	var meta member
	w := objectAt(b, params)
	for m, ok := w.next(); ok; m, ok = w.next() {
		if keyIs(b, m, "_meta") {
			meta = m
			break
		}
	}
	var buf [8]jsonrpc.Edit
	edits, kept := dropMembers(buf[:0], b, meta.val, func(m member) bool { return keyReserved(b, m) })
	if len(edits) == 0 {
		return append(dst, b...)
	}
	if kept == 0 { // drop _meta itself instead
		edits, _ = dropMembers(edits[:0], b, params, func(m member) bool { return m.key == meta.key })
	}
	return jsonrpc.Splice(dst, b, edits...)
}

// dropMembers appends to edits the deletions that remove from the object at
// obj the members drop selects, leaving valid JSON with the whitespace
// around the kept members as it was, and reports how many members are kept.
// It deletes each run of dropped members with the separator after it, or,
// for a run that ends the object, with the separator before it.
func dropMembers(edits []jsonrpc.Edit, b []byte, obj jsonrpc.Span, drop func(member) bool) ([]jsonrpc.Edit, int) {
	var prev member // the last member kept, if kept > 0
	var run jsonrpc.Span
	inRun, kept := false, 0
	w := objectAt(b, obj)
	for m, ok := w.next(); ok; m, ok = w.next() {
		switch d := drop(m); {
		case d && !inRun:
			run, inRun = jsonrpc.Span{Start: m.key.Start, End: m.val.End}, true
		case d:
			run.End = m.val.End
		case inRun: // m ends a run: delete up to m's key
			edits = append(edits, jsonrpc.Edit{Span: jsonrpc.Span{Start: run.Start, End: m.key.Start}})
			inRun = false
			fallthrough
		default:
			prev = m
			kept++
		}
	}
	if w.bad {
		return edits[:0], kept + 1 // never splice into what was not understood
	}
	if inRun {
		if kept > 0 {
			run.Start = prev.val.End
		}
		edits = append(edits, jsonrpc.Edit{Span: run})
	}
	return edits, kept
}

// FromSessionEra appends to dst the reply a modern client should get for
// reply, a session-era server's whole JSON-RPC response to its request of
// method.
//
// A result object gains "resultType":"complete" (2026-07-28 requires it on
// every result; a session-era result is final by construction, but for one of
// tools/call, prompts/get or resources/read carrying inputRequests or
// requestState, which gains "resultType":"input_required": a server on an
// SDK of both eras may answer so) and, for the
// cacheable methods (tools/list, prompts/list, resources/list,
// resources/templates/list, resources/read), "ttlMs":0 and
// "cacheScope":"private" (always safe: immediately stale, never shared
// across users) — each only if the result does not have it already. They
// are inserted at the start of the object; the rest is copied byte for byte.
//
// An error passes unchanged, except that for resources/read the session eras'
// "resource not found" code -32002 becomes -32602, the code 2026-07-28
// gives it (SEP-2164) and forbids the other for. Anything else — a result
// that is not an object, a reply that is not a valid response — is copied
// as it is.
func FromSessionEra(dst []byte, method string, reply []byte) []byte {
	msg, err := jsonrpc.Parse(reply)
	if err != nil || msg.Kind != jsonrpc.KindResponse {
		return append(dst, reply...)
	}
	top := wholeValue(reply)
	if msg.IsError {
		if method != protocol.MethodResourcesRead {
			return append(dst, reply...)
		}
		code := find(reply, find(reply, top, "error"), "code")
		if !code.Present() || !numberIs(reply[code.Start:code.End], protocol.CodeResourceNotFound) {
			return append(dst, reply...)
		}
		return jsonrpc.Splice(dst, reply, jsonrpc.Edit{Span: code, Value: []byte(strconv.Itoa(protocol.CodeInvalidParams))})
	}
	result := find(reply, top, "result")
	if !isObject(reply, result) {
		return append(dst, reply...)
	}
	var hasType, hasTTL, hasScope, hasInput, empty bool
	empty = true
	w := objectAt(reply, result)
	for m, ok := w.next(); ok; m, ok = w.next() {
		empty = false
		hasType = hasType || keyIs(reply, m, "resultType")
		hasInput = hasInput || keyIs(reply, m, "inputRequests") || keyIs(reply, m, "requestState")
		hasTTL = hasTTL || keyIs(reply, m, "ttlMs")
		hasScope = hasScope || keyIs(reply, m, "cacheScope")
	}
	if w.bad {
		return append(dst, reply...)
	}
	var buf [64]byte
	ins := buf[:0]
	add := func(member string) {
		if len(ins) > 0 {
			ins = append(ins, ',')
		}
		ins = append(ins, member...)
	}
	switch {
	case hasType:
	case hasInput && protocol.AllowsInputRequired(method):
		// A server built on an SDK of both eras may answer a session-era
		// client with its own multi round-trip result, untyped: it is one.
		add(`"resultType":"input_required"`)
	default:
		add(`"resultType":"complete"`)
	}
	if protocol.IsCacheable(method) {
		if !hasTTL {
			add(`"ttlMs":0`)
		}
		if !hasScope {
			add(`"cacheScope":"private"`)
		}
	}
	if len(ins) == 0 {
		return append(dst, reply...)
	}
	if !empty {
		ins = append(ins, ',')
	}
	at := jsonrpc.Span{Start: result.Start + 1, End: result.Start + 1}
	return jsonrpc.Splice(dst, reply, jsonrpc.Edit{Span: at, Value: ins})
}

// numberIs reports whether the JSON number n has the value want (so that
// -32002, -32002.0 and -3.2002e4 all match).
func numberIs(n []byte, want float64) bool {
	f, err := strconv.ParseFloat(string(n), 64)
	return err == nil && f == want
}

// ErrorCode returns the error code of msg, an error response, or 0 when it
// has none that is an integer.
func ErrorCode(msg *jsonrpc.Message) int {
	if !msg.IsError {
		return 0
	}
	code := find(msg.Raw, find(msg.Raw, wholeValue(msg.Raw), "error"), "code")
	if !code.Present() {
		return 0
	}
	n, err := strconv.Atoi(string(msg.Raw[code.Start:code.End]))
	if err != nil {
		return 0
	}
	return n
}
