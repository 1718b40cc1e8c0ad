package front

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file reads and writes the W3C trace context a request carries in
// params._meta (traceparent, tracestate: MCP's 2026-07-28 revision and
// SEP-414). Only params._meta is rewritten; the rest of the message, its
// id first, is spliced around it byte for byte.

// Keys of the trace context in params._meta, as W3C names them.
const (
	metaTraceparent = "traceparent"
	metaTracestate  = "tracestate"
)

// traceMeta is what a request's params._meta says of tracing, and where
// it is. Spans index the message's Raw.
type traceMeta struct {
	// ok: the message can take a trace context (params absent, or an
	// object whose _meta is absent, null or an object).
	ok          bool
	params      jsonrpc.Span // absent: the message has no params
	paramsEmpty bool         // params is {}
	meta        jsonrpc.Span // absent: params has no _meta
	metaObject  bool         // meta is an object (not null)

	traceparent, tracestate string // "" when absent or not strings
	version                 string // _meta's protocol version (2026-07-28)
}

// readTraceMeta reads msg's params._meta. A message it cannot read
// strictly (a duplicate member, invalid UTF-8) is not ok: it goes on as it
// came, and the server refuses it or not.
func readTraceMeta(msg *jsonrpc.Message) traceMeta {
	var tm traceMeta
	raw := msg.Raw
	top := wholeSpan(raw)
	if !eachMember(raw, top, func(name string, _, v jsonrpc.Span) {
		if name == "params" {
			tm.params = v
		}
	}) {
		return tm
	}
	if !tm.params.Present() {
		tm.ok = true
		return tm
	}
	if raw[tm.params.Start] != '{' {
		return tm
	}
	tm.paramsEmpty = true
	if !eachMember(raw, tm.params, func(name string, _, v jsonrpc.Span) {
		tm.paramsEmpty = false
		if name == "_meta" {
			tm.meta = v
		}
	}) {
		return tm
	}
	if !tm.meta.Present() || bytes.Equal(raw[tm.meta.Start:tm.meta.End], []byte("null")) {
		tm.ok = true
		return tm
	}
	if raw[tm.meta.Start] != '{' {
		return tm
	}
	tm.metaObject = true
	tm.ok = eachMember(raw, tm.meta, func(name string, _, v jsonrpc.Span) {
		var dst *string
		switch name {
		case metaTraceparent:
			dst = &tm.traceparent
		case metaTracestate:
			dst = &tm.tracestate
		case protocol.MetaProtocolVersion:
			dst = &tm.version
		default:
			return
		}
		if s, err := jsontext.AppendUnquote(nil, raw[v.Start:v.End]); err == nil && raw[v.Start] == '"' {
			*dst = string(s)
		}
	})
	return tm
}

// withTraceMeta returns msg's bytes with params._meta's traceparent and
// tracestate set to tp and ts (ts "": none), replacing the client's; the
// other _meta members keep their names and values byte for byte. tm is
// readTraceMeta(msg), and must be ok.
func withTraceMeta(msg *jsonrpc.Message, tm traceMeta, tp, ts string) []byte {
	raw := msg.Raw
	// W3C trace context is printable ASCII: Go's quoting is JSON's.
	ours := strconv.AppendQuote(append(strconv.AppendQuote(nil, metaTraceparent), ':'), tp)
	if ts != "" {
		ours = append(ours, ',')
		ours = strconv.AppendQuote(append(strconv.AppendQuote(ours, metaTracestate), ':'), ts)
	}
	var edit jsonrpc.Edit
	switch {
	case !tm.params.Present():
		// Before the message's closing brace: `,"params":{"_meta":{...}}`.
		end := bytes.LastIndexByte(raw, '}')
		v := append([]byte(`,"params":{"_meta":{`), ours...)
		edit = jsonrpc.Edit{Span: jsonrpc.Span{Start: end, End: end}, Value: append(v, "}}"...)}
	case !tm.meta.Present():
		at := tm.params.Start + 1
		v := append(append([]byte(`"_meta":{`), ours...), '}')
		if !tm.paramsEmpty {
			v = append(v, ',')
		}
		edit = jsonrpc.Edit{Span: jsonrpc.Span{Start: at, End: at}, Value: v}
	default:
		v := append([]byte{'{'}, ours...)
		if tm.metaObject {
			eachMember(raw, tm.meta, func(name string, n, val jsonrpc.Span) {
				if name == metaTraceparent || name == metaTracestate {
					return
				}
				v = append(append(append(append(v, ','), raw[n.Start:n.End]...), ':'), raw[val.Start:val.End]...)
			})
		}
		edit = jsonrpc.Edit{Span: tm.meta, Value: append(v, '}')}
	}
	return jsonrpc.Splice(make([]byte, 0, len(raw)+len(edit.Value)+16), raw, edit)
}

// wholeSpan is the span of b without its surrounding whitespace.
func wholeSpan(b []byte) jsonrpc.Span {
	start, end := 0, len(b)
	for start < end && isSpace(b[start]) {
		start++
	}
	for end > start && isSpace(b[end-1]) {
		end--
	}
	return jsonrpc.Span{Start: start, End: end}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// eachMember calls fn with each member of the object raw[obj]: its
// unescaped name, and the spans (in raw) of its name and value. It
// reports false when raw[obj] is not a valid object with unique names.
func eachMember(raw []byte, obj jsonrpc.Span, fn func(name string, n, v jsonrpc.Span)) bool {
	b := raw[obj.Start:obj.End]
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadValue()
		if err != nil {
			return false
		}
		nEnd := obj.Start + int(dec.InputOffset())
		n := jsonrpc.Span{Start: nEnd - len(name), End: nEnd}
		unq, err := jsontext.AppendUnquote(nil, name)
		if err != nil {
			return false
		}
		val, err := dec.ReadValue()
		if err != nil {
			return false
		}
		vEnd := obj.Start + int(dec.InputOffset())
		fn(string(unq), n, jsonrpc.Span{Start: vEnd - len(val), End: vEnd})
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return false
	}
	_, err := dec.ReadToken()
	return errors.Is(err, io.EOF) // nothing after the object
}
