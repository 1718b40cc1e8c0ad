package echoserver

import (
	"bytes"
	"strconv"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// This file answers the fixture's test hooks: tools a test calls to make
// the replies a gateway must pass on unchanged that echo never makes. They
// are not in tools/list, so that a benchmark's tools/list stays one tool.
//
//   - big: {"bytes":N} returns a text of N 'x' (at most MaxHookBytes): one
//     line of megabytes.
//   - pretty: {"message":M} returns what echo does, written indented. On
//     stdio a message is one line (stdio's framing forbids line breaks
//     inside one), so there the lines of the indented reply are joined by
//     tabs; over HTTP by newlines.
//   - progress: {"message":M,"count":N} with params._meta.progressToken
//     sends N notifications/progress (at most MaxHookCount) on stdio, then
//     returns what echo does; over HTTP, where each reply is one body, it
//     sends none.
//
// Only requests of the session eras reach them.

// Bounds of the hooks' arguments.
const (
	MaxHookBytes = 15 << 20 // under MaxLineBytes, with room for the envelope
	MaxHookCount = 100_000
)

func isHook(name []byte) bool {
	switch string(name) {
	case "big", "pretty", "progress":
		return true
	}
	return false
}

// appendHook appends the messages hook call p sends and its reply (the
// reply without a newline, as AppendReply's). With lines, the messages
// before the reply each end with a newline.
func appendHook(dst, id []byte, p *params, lines bool) []byte {
	switch string(p.name) {
	case "big":
		n, err := strconv.Atoi(string(p.bytes))
		if err != nil || n < 0 || n > MaxHookBytes {
			return jsonrpc.AppendErrorResponse(dst, id, codeInvalidParams, "arguments.bytes must be an integer from 0 to "+strconv.Itoa(MaxHookBytes))
		}
		dst = append(dst, `{"jsonrpc":"2.0","id":`...)
		dst = append(dst, id...)
		dst = append(dst, `,"result":{"content":[{"type":"text","text":"`...)
		dst = append(dst, bytes.Repeat([]byte{'x'}, n)...)
		return append(dst, `"}]}}`...)
	case "pretty":
		if p.message == nil {
			return jsonrpc.AppendErrorResponse(dst, id, codeInvalidParams, "arguments.message must be a string")
		}
		nl := "\t"
		if !lines {
			nl = "\n"
		}
		// Indented as a JSON pretty-printer does, two spaces a level.
		dst = append(dst, "{"+nl+`  "jsonrpc": "2.0",`+nl+`  "id": `...)
		dst = append(dst, id...)
		dst = append(dst, ","+nl+`  "result": {`+nl+`    "content": [`+nl+`      {`+nl+`        "type": "text",`+nl+`        "text": `...)
		dst = append(dst, p.message...)
		return append(dst, nl+"      }"+nl+"    ]"+nl+"  }"+nl+"}"...)
	default: // progress
		if p.message == nil {
			return jsonrpc.AppendErrorResponse(dst, id, codeInvalidParams, "arguments.message must be a string")
		}
		n, err := strconv.Atoi(string(p.count))
		if err != nil || n < 0 || n > MaxHookCount {
			return jsonrpc.AppendErrorResponse(dst, id, codeInvalidParams, "arguments.count must be an integer from 0 to "+strconv.Itoa(MaxHookCount))
		}
		if lines && p.progressToken != nil {
			for i := 1; i <= n; i++ {
				dst = append(dst, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
				dst = append(dst, p.progressToken...)
				dst = append(dst, `,"progress":`...)
				dst = strconv.AppendInt(dst, int64(i), 10)
				dst = append(dst, `,"total":`...)
				dst = strconv.AppendInt(dst, int64(n), 10)
				dst = append(dst, "}}\n"...)
			}
		}
		dst = append(dst, `{"jsonrpc":"2.0","id":`...)
		dst = append(dst, id...)
		dst = append(dst, `,"result":{"content":[{"type":"text","text":`...)
		dst = append(dst, p.message...)
		return append(dst, `}]}}`...)
	}
}
