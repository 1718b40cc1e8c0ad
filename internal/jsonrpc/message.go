package jsonrpc

import (
	"bytes"
	"errors"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// Kind says which of the three JSON-RPC 2.0 message shapes a Message has.
type Kind uint8

const (
	// KindRequest has a method and an id.
	KindRequest Kind = iota + 1
	// KindNotification has a method and no id.
	KindNotification
	// KindResponse has an id and exactly one of result or error, and no method.
	KindResponse
)

// String returns the kind's lower-case name, for logs.
func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// ErrParse is wrapped by every error about bytes that are not one valid JSON
// text (malformed JSON, invalid UTF-8, duplicate keys, trailing data).
var ErrParse = errors.New("jsonrpc: parse error")

// ErrInvalidRequest is wrapped by every error about valid JSON that is not a
// valid JSON-RPC 2.0 message.
var ErrInvalidRequest = errors.New("jsonrpc: invalid request")

// Code returns the JSON-RPC error code a client should see for err:
// [protocol.CodeParseError] for [ErrParse], [protocol.CodeInvalidRequest] for
// [ErrInvalidRequest], and [protocol.CodeInternalError] otherwise.
func Code(err error) int {
	switch {
	case errors.Is(err, ErrParse):
		return protocol.CodeParseError
	case errors.Is(err, ErrInvalidRequest):
		return protocol.CodeInvalidRequest
	}
	return protocol.CodeInternalError
}

// Span locates a JSON value inside Message.Raw as Raw[Start:End].
// The zero Span means absent.
type Span struct{ Start, End int }

// Present reports whether the span locates a value.
func (s Span) Present() bool { return s.End > 0 }

// Len returns the length of the located value in bytes (0 if absent).
func (s Span) Len() int { return s.End - s.Start }

// Message is one parsed JSON-RPC 2.0 message. Its spans index Raw, which is
// the caller's buffer, not a copy.
type Message struct {
	Raw  []byte // the bytes parsed; not copied
	Kind Kind
	// ID is the raw id value: a JSON string or number, kept byte for byte
	// (numbers are never converted). In an error response it may be the
	// literal null.
	ID Span
	// Method is the method's JSON string token, quotes included.
	Method Span
	// ProgressToken is params._meta.progressToken (a request asking for
	// progress) or, in a notifications/progress, params.progressToken; if
	// present and a string or number.
	ProgressToken Span
	// CancelRequestID is params.requestId when Method is
	// "notifications/cancelled", if present and a string or number.
	CancelRequestID Span
	// Task is params.task (a request asking to run as a task), if present,
	// whatever its type.
	Task Span
	// Params is params when it is an object or an array, and Meta is
	// params._meta when it is an object: what the checks of the stateless
	// revision read, located once here rather than by walking the
	// message again.
	Params, Meta Span
	// IsError reports a response carrying "error".
	IsError bool
}

// Bytes returns m.Raw[s.Start:s.End], or nil if s is absent.
func (m *Message) Bytes(s Span) []byte {
	if !s.Present() {
		return nil
	}
	return m.Raw[s.Start:s.End:s.End]
}

// methodRaw returns the method's string content between the quotes,
// still escaped, and whether it contains escapes.
func (m *Message) methodRaw() (raw []byte, escaped bool) {
	s := m.Method
	if !s.Present() || s.Len() < 2 {
		return nil, false
	}
	raw = m.Raw[s.Start+1 : s.End-1]
	return raw, bytes.IndexByte(raw, '\\') >= 0
}

// MethodName returns the unquoted method name, or "" if there is none.
//
// When the method has no escape sequences (the usual case) the returned
// string shares memory with m.Raw and costs no allocation: it is valid only
// while m.Raw is not modified, so a caller that keeps it beyond that (in a
// map, a log record built later, another goroutine) must strings.Clone it.
// Comparing it or switching on it right away is always safe. Use
// [Message.MethodIs] to compare without holding a string at all.
func (m *Message) MethodName() string {
	raw, escaped := m.methodRaw()
	if len(raw) == 0 {
		return ""
	}
	if !escaped {
		return unsafe.String(&raw[0], len(raw))
	}
	u, err := jsontext.AppendUnquote(nil, m.Raw[m.Method.Start:m.Method.End])
	if err != nil || len(u) == 0 {
		return "" // unreachable for a Message returned by Parse
	}
	return unsafe.String(&u[0], len(u)) // u is ours alone and never modified
}

// MethodIs reports whether the unquoted method name equals name. It does not
// allocate unless the method is written with escape sequences.
func (m *Message) MethodIs(name string) bool {
	raw, escaped := m.methodRaw()
	if !escaped {
		return m.Method.Present() && string(raw) == name
	}
	return m.MethodName() == name
}
