package jsonrpc

import (
	"fmt"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// Parse validates b as exactly one JSON-RPC 2.0 message (a JSON object,
// whitespace around it allowed) and locates its id, method, progress token
// and cancelled request id. The returned Message aliases b.
//
// JSON errors wrap [ErrParse] and take precedence over JSON-RPC errors
// (wrong "jsonrpc", wrong member types or combinations, a batch), which wrap
// [ErrInvalidRequest]. The whole of b is validated as JSON (syntax, UTF-8,
// escapes, nesting up to 10000 levels, nothing but whitespace after the
// message); duplicate keys are errors in the objects Parse reads (the
// message itself, params and params._meta) and are left to the receiver in
// the values Parse only passes through (params.arguments, result,
// error.data...). Keys are compared after unescaping. Values other than
// those located are validated but never materialised.
func Parse(b []byte) (Message, error) {
	w := walker{b: b}
	m, err := w.parse()
	if err != nil {
		return Message{Raw: b}, err
	}
	return m, nil
}

// walker reads a message's envelope, member by member, and skips the
// values it does not read with skipValue.
type walker struct {
	b       []byte
	i       int   // next byte to read
	invalid error // first ErrInvalidRequest found; reported only if the JSON is valid
	token   Span  // params.progressToken, kept for notifications/progress
}

// fail records a JSON-RPC violation. Parsing goes on, because malformed
// JSON anywhere in the message takes precedence (JSON-RPC 2.0, section 5.1:
// a parse error is reported when the text cannot be parsed at all).
func (w *walker) fail(format string, args ...any) {
	if w.invalid == nil {
		w.invalid = fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
	}
}

// value validates the value at w.i, the member of an object at the given
// depth, and returns its kind (as jsontext.Kind: '"', '0' for a number,
// 'n', 't', 'f', '{', '[') and span.
func (w *walker) value(depth int) (kind byte, s Span, err error) {
	end, e := skipValue(w.b, w.i, depth)
	if e != scanOK {
		return 0, Span{}, parseError(w.b, end, e)
	}
	s, w.i = Span{Start: w.i, End: end}, end
	switch kind = w.b[s.Start]; kind {
	case '"', 'n', 't', 'f', '{', '[':
	default:
		kind = '0'
	}
	return kind, s, nil
}

// skip validates and passes over the value at w.i.
func (w *walker) skip(depth int) error {
	_, _, err := w.value(depth)
	return err
}

// peek returns the next byte that is not whitespace, or 0 at the end.
func (w *walker) peek() byte {
	if w.i = skipSpace(w.b, w.i); w.i < len(w.b) {
		return w.b[w.i]
	}
	return 0
}

// next moves to the next member of the object whose '{' is at w.i (first)
// or which is being walked. It returns the member's name content (between
// the quotes, still escaped) and leaves w.i at the value; at the closing
// '}' it consumes it and reports ok == false. A name seen before in names
// is an error; where is the object's JSON Pointer, for the message.
func (w *walker) next(names *nameSet, first bool, where string) (name []byte, escaped, ok bool, err error) {
	c := w.peek()
	switch {
	case first && c == '{':
		w.i++
		if c = w.peek(); c == '}' {
			w.i++
			return nil, false, false, nil
		}
	case !first && c == ',':
		w.i++
		c = w.peek()
	case !first && c == '}':
		w.i++
		return nil, false, false, nil
	default:
		return nil, false, false, w.unexpected()
	}
	if c != '"' {
		return nil, false, false, w.unexpected()
	}
	end, escaped, e := scanString(w.b, w.i)
	next := end
	if e == scanOK {
		next, e = skipColon(w.b, end)
	}
	if e != scanOK {
		return nil, false, false, parseError(w.b, next, e)
	}
	s := Span{Start: w.i + 1, End: end - 1}
	w.i = next
	if names.add(w.b, s, escaped) {
		if where == "" {
			return nil, false, false, fmt.Errorf("%w: duplicate key %q", ErrParse, unquoted(w.b[s.Start:s.End], escaped))
		}
		return nil, false, false, fmt.Errorf("%w: duplicate key %q in %s", ErrParse, unquoted(w.b[s.Start:s.End], escaped), where)
	}
	w.peek()
	return w.b[s.Start:s.End], escaped, true, nil
}

// unexpected reports the byte at w.i, or the end of input, as out of place.
func (w *walker) unexpected() error {
	if w.i >= len(w.b) {
		return parseError(w.b, w.i, scanEOF)
	}
	return parseError(w.b, w.i, scanChar)
}

// finish checks that nothing but whitespace follows the top-level value.
func (w *walker) finish() error {
	if w.peek(); w.i < len(w.b) {
		return fmt.Errorf("%w: trailing data after message", ErrParse)
	}
	return nil
}

func (w *walker) parse() (Message, error) {
	m := Message{Raw: w.b}
	if err := checkUTF8(w.b); err != nil {
		return m, err
	}
	switch k := w.peek(); {
	case k == '{':
	case w.i >= len(w.b):
		return m, parseError(w.b, w.i, scanEOF)
	default:
		if err := w.skip(0); err != nil {
			return m, err
		}
		if err := w.finish(); err != nil {
			return m, err
		}
		if k == '[' {
			return m, fmt.Errorf("%w: message is a batch (JSON array); split it with SplitBatch", ErrInvalidRequest)
		}
		return m, fmt.Errorf("%w: message must be a JSON object", ErrInvalidRequest)
	}

	var hasVersion, hasID, idNull, hasMethod, hasResult, hasError bool
	var names nameSet
	for first := true; ; first = false {
		name, escaped, ok, err := w.next(&names, first, "")
		if err != nil {
			return m, err
		}
		if !ok {
			break
		}
		switch lookup(name, escaped, "jsonrpc", "id", "method", "params", "result", "error") {
		case "jsonrpc":
			k, s, err := w.value(1)
			if err != nil {
				return m, err
			}
			if k != '"' || !isString(w.b[s.Start+1:s.End-1], "2.0") {
				w.fail(`"jsonrpc" must be "2.0"`)
			}
			hasVersion = true
		case "id":
			k, s, err := w.value(1)
			if err != nil {
				return m, err
			}
			switch k {
			case '"', '0':
				m.ID = s
			case 'n':
				m.ID, idNull = s, true
			default:
				w.fail(`"id" must be a string or number`)
			}
			hasID = true
		case "method":
			k, s, err := w.value(1)
			if err != nil {
				return m, err
			}
			if k != '"' {
				w.fail(`"method" must be a string`)
			}
			m.Method, hasMethod = s, true
		case "params":
			switch c, start := w.peek(), w.i; c {
			case '{':
				err = w.params(&m)
				m.Params = Span{Start: start, End: w.i}
			case '[':
				err = w.skip(1)
				m.Params = Span{Start: start, End: w.i}
			default:
				if err = w.skip(1); err == nil {
					w.fail(`"params" must be an object or array`)
				}
			}
			if err != nil {
				return m, err
			}
		case "result":
			if err := w.skip(1); err != nil {
				return m, err
			}
			hasResult = true
		case "error":
			isObject := w.peek() == '{'
			if err := w.skip(1); err != nil {
				return m, err
			}
			if !isObject {
				w.fail(`"error" must be an object`)
			}
			hasError = true
		default:
			if err := w.skip(1); err != nil {
				return m, err
			}
		}
	}
	if err := w.finish(); err != nil {
		return m, err
	}
	if w.invalid != nil {
		return m, w.invalid
	}

	if !hasVersion {
		return m, fmt.Errorf(`%w: missing "jsonrpc" (must be "2.0")`, ErrInvalidRequest)
	}
	switch {
	case hasMethod:
		if hasResult || hasError {
			return m, fmt.Errorf(`%w: a request or notification must not carry "result" or "error"`, ErrInvalidRequest)
		}
		m.Kind = KindNotification
		if hasID {
			if idNull {
				return m, fmt.Errorf(`%w: "id" must not be null in a request`, ErrInvalidRequest)
			}
			m.Kind = KindRequest
		}
		if m.CancelRequestID.Present() && !m.MethodIs(protocol.NotificationCancelled) {
			m.CancelRequestID = Span{}
		}
		if w.token.Present() && m.MethodIs(protocol.NotificationProgress) {
			m.ProgressToken = w.token
		}
	case hasID:
		if hasResult == hasError {
			return m, fmt.Errorf(`%w: a response must carry exactly one of "result" and "error"`, ErrInvalidRequest)
		}
		if idNull && !hasError {
			return m, fmt.Errorf(`%w: "id" may be null only in an error response`, ErrInvalidRequest)
		}
		m.Kind, m.IsError = KindResponse, hasError
		m.CancelRequestID, m.Task, m.Params, m.Meta = Span{}, Span{}, Span{}, Span{}
	default:
		return m, fmt.Errorf(`%w: missing "method" (request or notification) or "id" (response)`, ErrInvalidRequest)
	}
	return m, nil
}

// params walks the params object at w.i, looking only at _meta.progressToken,
// requestId and task. requestId is kept whatever the method (which may come
// later); parse drops it unless the method is notifications/cancelled.
func (w *walker) params(m *Message) error {
	var names nameSet
	for first := true; ; first = false {
		name, escaped, ok, err := w.next(&names, first, "/params")
		if err != nil || !ok {
			return err
		}
		switch lookup(name, escaped, "_meta", "requestId", protocol.MetaProgressToken, "task") {
		case "_meta":
			if w.peek() == '{' {
				start := w.i
				err = w.meta(m)
				m.Meta = Span{Start: start, End: w.i}
			} else {
				err = w.skip(2)
			}
		case "requestId":
			m.CancelRequestID, err = w.idLike(2)
		case protocol.MetaProgressToken:
			w.token, err = w.idLike(2)
		case "task":
			_, m.Task, err = w.value(2)
		default:
			err = w.skip(2)
		}
		if err != nil {
			return err
		}
	}
}

// meta walks params._meta at w.i, looking only at progressToken.
func (w *walker) meta(m *Message) error {
	var names nameSet
	for first := true; ; first = false {
		name, escaped, ok, err := w.next(&names, first, "/params/_meta")
		if err != nil || !ok {
			return err
		}
		if lookup(name, escaped, protocol.MetaProgressToken) != "" {
			m.ProgressToken, err = w.idLike(3)
		} else {
			err = w.skip(3)
		}
		if err != nil {
			return err
		}
	}
}

// idLike reads a value and locates it if it is a string or number, the
// types MCP allows for progress tokens and request ids.
func (w *walker) idLike(depth int) (Span, error) {
	k, s, err := w.value(depth)
	if err != nil || k != '"' && k != '0' {
		return Span{}, err
	}
	return s, nil
}
