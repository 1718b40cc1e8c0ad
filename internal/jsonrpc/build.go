package jsonrpc

import (
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The constructors below build the few messages the gateway writes itself.
// Each takes raw JSON for ids, params and results (copied as is, never
// re-encoded); a nil or empty id is written as null. The Append forms append
// to dst and return it, for callers that reuse buffers.

// ErrorResponse returns an error response for id with the given code and
// message. A nil id (the request could not be read) is written as null.
func ErrorResponse(id []byte, code int, message string) []byte {
	return AppendErrorResponse(nil, id, code, message)
}

// AppendErrorResponse is the append form of [ErrorResponse].
func AppendErrorResponse(dst, id []byte, code int, message string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendRaw(dst, id, "null")
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, message)
	return append(dst, `}}`...)
}

// Response returns a successful response for id. A nil result is written as
// {} (MCP's empty result).
func Response(id []byte, result []byte) []byte {
	return AppendResponse(nil, id, result)
}

// AppendResponse is the append form of [Response].
func AppendResponse(dst, id, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendRaw(dst, id, "null")
	dst = append(dst, `,"result":`...)
	dst = appendRaw(dst, result, "{}")
	return append(dst, '}')
}

// Request returns a request. params nil means the member is omitted. The id
// must not be nil: a request with a null id is invalid.
func Request(id []byte, method string, params []byte) []byte {
	return AppendRequest(nil, id, method, params)
}

// AppendRequest is the append form of [Request].
func AppendRequest(dst, id []byte, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendRaw(dst, id, "null")
	return appendMethodParams(dst, method, params)
}

// Notification returns a notification. params nil means the member is omitted.
func Notification(method string, params []byte) []byte {
	return AppendNotification(nil, method, params)
}

// AppendNotification is the append form of [Notification].
func AppendNotification(dst []byte, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0"`...)
	return appendMethodParams(dst, method, params)
}

func appendMethodParams(dst []byte, method string, params []byte) []byte {
	dst = append(dst, `,"method":`...)
	dst = appendString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

func appendRaw(dst, raw []byte, ifEmpty string) []byte {
	if len(raw) == 0 {
		return append(dst, ifEmpty...)
	}
	return append(dst, raw...)
}

// appendString appends s as a JSON string. Invalid UTF-8 (from a message
// built out of an upstream's stderr, say) becomes U+FFFD rather than
// producing invalid JSON.
func appendString(dst []byte, s string) []byte {
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		out, _ = jsontext.AppendQuote(dst, strings.ToValidUTF8(s, "\uFFFD"))
	}
	return out
}
