package jsonrpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// methodCancelled is the one method whose params Parse looks into beyond
// _meta (MCP 2025-06-18, "Cancellation").
const methodCancelled = "notifications/cancelled"

// methodProgress carries its token in params.progressToken, not in _meta.
const methodProgress = "notifications/progress"

// decoder is a jsontext.Decoder reading straight from the caller's bytes.
// jsontext decodes a *bytes.Buffer in place, without copying into an
// internal buffer and without overwriting consumed bytes, so the offsets it
// reports are offsets into the caller's slice. Pooled: see getDecoder.
type decoder struct {
	buf     bytes.Buffer
	dec     jsontext.Decoder
	scratch []byte // unescaped object names and strings; reused
	invalid error  // first ErrInvalidRequest found; reported only if the JSON is valid
	token   Span   // params.progressToken, kept for notifications/progress
}

var decoderPool = sync.Pool{New: func() any { return new(decoder) }}

func getDecoder(b []byte) *decoder {
	d := decoderPool.Get().(*decoder)
	d.buf = *bytes.NewBuffer(b)
	d.dec.Reset(&d.buf) // default options: duplicate names and invalid UTF-8 are errors
	d.invalid, d.token = nil, Span{}
	return d
}

func putDecoder(d *decoder) {
	// Drop every reference to the caller's bytes before pooling.
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf)
	if cap(d.scratch) > 4<<10 {
		d.scratch = nil
	}
	d.invalid = nil
	decoderPool.Put(d)
}

// readValue reads the next value (or object name) and locates it in the input.
func (d *decoder) readValue() (jsontext.Value, Span, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, Span{}, parseError(err)
	}
	end := int(d.dec.InputOffset())
	return v, Span{Start: end - len(v), End: end}, nil
}

// readName reads an object name and returns it unescaped. The result is
// valid until the next call that uses d.scratch.
func (d *decoder) readName() ([]byte, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, parseError(err)
	}
	return d.unquote(v), nil
}

// unquote returns the content of the valid JSON string v, unescaped.
func (d *decoder) unquote(v jsontext.Value) []byte {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	d.scratch, _ = jsontext.AppendUnquote(d.scratch[:0], v) // v was validated by the decoder
	return d.scratch
}

// skip validates and passes over the next value. ReadValue rather than
// SkipValue: the input is already in memory, so nothing is copied, and
// consuming a whole value at once is much faster than token by token.
func (d *decoder) skip() error {
	if _, err := d.dec.ReadValue(); err != nil {
		return parseError(err)
	}
	return nil
}

// beginObject consumes the '{' that PeekKind reported.
func (d *decoder) beginObject() error {
	if _, err := d.dec.ReadToken(); err != nil {
		return parseError(err)
	}
	return nil
}

// more reports whether another member follows in the current object, and
// consumes the closing '}' when none does. A syntax error makes it report
// true so that the next read returns the error.
func (d *decoder) more() (bool, error) {
	if d.dec.PeekKind() != '}' {
		return true, nil
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return false, parseError(err)
	}
	return false, nil
}

// fail records a JSON-RPC violation. Parsing goes on, because malformed
// JSON anywhere in the message takes precedence (JSON-RPC 2.0, section 5.1:
// a parse error is reported when the text cannot be parsed at all).
func (d *decoder) fail(format string, args ...any) {
	if d.invalid == nil {
		d.invalid = fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
	}
}

// finish checks that nothing but whitespace follows the top-level value.
func (d *decoder) finish(b []byte) error {
	for _, c := range b[d.dec.InputOffset():] {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return fmt.Errorf("%w: trailing data after message", ErrParse)
		}
	}
	return nil
}

// parseError turns a jsontext error into one wrapping ErrParse that says
// what is wrong.
func parseError(err error) error {
	var se *jsontext.SyntacticError
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: unexpected end of input", ErrParse)
	case errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName):
		where := se.JSONPointer.Parent()
		if where == "" {
			return fmt.Errorf("%w: duplicate key %q", ErrParse, se.JSONPointer.LastToken())
		}
		return fmt.Errorf("%w: duplicate key %q in %s", ErrParse, se.JSONPointer.LastToken(), where)
	}
	return fmt.Errorf("%w: %s", ErrParse, strings.TrimPrefix(err.Error(), "jsontext: "))
}

// Parse validates b as exactly one JSON-RPC 2.0 message (a JSON object,
// whitespace around it allowed) and locates its id, method, progress token
// and cancelled request id. The returned Message aliases b.
//
// JSON errors (malformed, invalid UTF-8, a duplicate key at any depth,
// trailing data) wrap [ErrParse] and take precedence over JSON-RPC errors
// (wrong "jsonrpc", wrong member types or combinations, a batch), which wrap
// [ErrInvalidRequest]. Keys are compared after unescaping. Values other than
// those located are validated but never materialised.
func Parse(b []byte) (Message, error) {
	d := getDecoder(b)
	m, err := d.parse(b)
	putDecoder(d)
	if err != nil {
		return Message{Raw: b}, err
	}
	return m, nil
}

func (d *decoder) parse(b []byte) (Message, error) {
	m := Message{Raw: b}
	switch k := d.dec.PeekKind(); k {
	case '{':
	case 0: // empty input or a syntax error
		if _, err := d.dec.ReadToken(); err != nil {
			return m, parseError(err)
		}
		return m, fmt.Errorf("%w: no JSON value", ErrParse) // unreachable in practice
	default:
		if _, err := d.dec.ReadValue(); err != nil {
			return m, parseError(err)
		}
		if err := d.finish(b); err != nil {
			return m, err
		}
		if k == '[' {
			return m, fmt.Errorf("%w: message is a batch (JSON array); split it with SplitBatch", ErrInvalidRequest)
		}
		return m, fmt.Errorf("%w: message must be a JSON object", ErrInvalidRequest)
	}

	var hasVersion, hasID, idNull, hasMethod, hasResult, hasError bool
	if err := d.beginObject(); err != nil {
		return m, err
	}
	for {
		more, err := d.more()
		if err != nil {
			return m, err
		}
		if !more {
			break
		}
		name, err := d.readName()
		if err != nil {
			return m, err
		}
		switch string(name) {
		case "jsonrpc":
			v, _, err := d.readValue()
			if err != nil {
				return m, err
			}
			if v.Kind() != '"' || string(d.unquote(v)) != "2.0" {
				d.fail(`"jsonrpc" must be "2.0"`)
			}
			hasVersion = true
		case "id":
			v, span, err := d.readValue()
			if err != nil {
				return m, err
			}
			switch v.Kind() {
			case '"', '0':
				m.ID = span
			case 'n':
				m.ID, idNull = span, true
			default:
				d.fail(`"id" must be a string or number`)
			}
			hasID = true
		case "method":
			v, span, err := d.readValue()
			if err != nil {
				return m, err
			}
			if v.Kind() != '"' {
				d.fail(`"method" must be a string`)
			}
			m.Method, hasMethod = span, true
		case "params":
			switch d.dec.PeekKind() {
			case '{':
				err = d.params(&m)
			case '[':
				err = d.skip()
			default:
				if _, _, err = d.readValue(); err == nil {
					d.fail(`"params" must be an object or array`)
				}
			}
			if err != nil {
				return m, err
			}
		case "result":
			if err := d.skip(); err != nil {
				return m, err
			}
			hasResult = true
		case "error":
			if d.dec.PeekKind() != '{' {
				if _, _, err := d.readValue(); err != nil {
					return m, err
				}
				d.fail(`"error" must be an object`)
			} else if err := d.skip(); err != nil {
				return m, err
			}
			hasError = true
		default:
			if err := d.skip(); err != nil {
				return m, err
			}
		}
	}
	if err := d.finish(b); err != nil {
		return m, err
	}
	if d.invalid != nil {
		return m, d.invalid
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
		if m.CancelRequestID.Present() && !m.MethodIs(methodCancelled) {
			m.CancelRequestID = Span{}
		}
		if d.token.Present() && m.MethodIs(methodProgress) {
			m.ProgressToken = d.token
		}
	case hasID:
		if hasResult == hasError {
			return m, fmt.Errorf(`%w: a response must carry exactly one of "result" and "error"`, ErrInvalidRequest)
		}
		if idNull && !hasError {
			return m, fmt.Errorf(`%w: "id" may be null only in an error response`, ErrInvalidRequest)
		}
		m.Kind, m.IsError = KindResponse, hasError
		m.CancelRequestID = Span{}
	default:
		return m, fmt.Errorf(`%w: missing "method" (request or notification) or "id" (response)`, ErrInvalidRequest)
	}
	return m, nil
}

// params walks the params object, looking only at _meta.progressToken and
// requestId. requestId is kept whatever the method (which may come later);
// parse drops it unless the method is notifications/cancelled.
func (d *decoder) params(m *Message) error {
	if err := d.beginObject(); err != nil {
		return err
	}
	for {
		more, err := d.more()
		if err != nil || !more {
			return err
		}
		name, err := d.readName()
		if err != nil {
			return err
		}
		switch string(name) {
		case "_meta":
			if d.dec.PeekKind() == '{' {
				err = d.meta(m)
			} else {
				err = d.skip()
			}
		case "requestId":
			m.CancelRequestID, err = d.readIDLike()
		case "progressToken":
			d.token, err = d.readIDLike()
		default:
			err = d.skip()
		}
		if err != nil {
			return err
		}
	}
}

// meta walks params._meta, looking only at progressToken.
func (d *decoder) meta(m *Message) error {
	if err := d.beginObject(); err != nil {
		return err
	}
	for {
		more, err := d.more()
		if err != nil || !more {
			return err
		}
		name, err := d.readName()
		if err != nil {
			return err
		}
		if string(name) == "progressToken" {
			m.ProgressToken, err = d.readIDLike()
		} else {
			err = d.skip()
		}
		if err != nil {
			return err
		}
	}
}

// readIDLike reads a value and locates it if it is a string or number, the
// types MCP allows for progress tokens and request ids.
func (d *decoder) readIDLike() (Span, error) {
	v, span, err := d.readValue()
	if err != nil {
		return Span{}, err
	}
	if k := v.Kind(); k != '"' && k != '0' {
		return Span{}, nil
	}
	return span, nil
}
