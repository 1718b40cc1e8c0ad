package jsonrpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// refDecoder is a jsontext.Decoder reading straight from the caller's bytes.
// jsontext decodes a *bytes.Buffer in place, without copying into an
// internal buffer and without overwriting consumed bytes, so the offsets it
// reports are offsets into the caller's slice. Pooled: see getRefDecoder.
type refDecoder struct {
	buf     bytes.Buffer
	dec     jsontext.Decoder
	scratch []byte // unescaped object names and strings; reused
	invalid error  // first ErrInvalidRequest found; reported only if the JSON is valid
	token   Span   // params.progressToken, kept for notifications/progress
	b       []byte // the bytes decoded
}

// valueStart is where the value after the name just read begins.
func (d *refDecoder) valueStart() int {
	i := int(d.dec.InputOffset())
	for i < len(d.b) && (d.b[i] == ' ' || d.b[i] == '\t' || d.b[i] == '\n' || d.b[i] == '\r' || d.b[i] == ':') {
		i++
	}
	return i
}

var refDecoderPool = sync.Pool{New: func() any { return new(refDecoder) }}

func getRefDecoder(b []byte) *refDecoder {
	d := refDecoderPool.Get().(*refDecoder)
	d.buf = *bytes.NewBuffer(b)
	d.dec.Reset(&d.buf) // default options: duplicate names and invalid UTF-8 are errors
	d.invalid, d.token, d.b = nil, Span{}, b
	return d
}

func putRefDecoder(d *refDecoder) {
	// Drop every reference to the caller's bytes before pooling.
	d.buf = bytes.Buffer{}
	d.dec.Reset(&d.buf)
	if cap(d.scratch) > 4<<10 {
		d.scratch = nil
	}
	d.invalid = nil
	refDecoderPool.Put(d)
}

// readValue reads the next value (or object name) and locates it in the input.
func (d *refDecoder) readValue() (jsontext.Value, Span, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, Span{}, refParseError(err)
	}
	end := int(d.dec.InputOffset())
	return v, Span{Start: end - len(v), End: end}, nil
}

// readName reads an object name and returns it unescaped. The result is
// valid until the next call that uses d.scratch.
func (d *refDecoder) readName() ([]byte, error) {
	v, err := d.dec.ReadValue()
	if err != nil {
		return nil, refParseError(err)
	}
	return d.unquote(v), nil
}

// unquote returns the content of the valid JSON string v, unescaped.
func (d *refDecoder) unquote(v jsontext.Value) []byte {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	d.scratch, _ = jsontext.AppendUnquote(d.scratch[:0], v) // v was validated by the refDecoder
	return d.scratch
}

// skip validates and passes over the next value. ReadValue rather than
// SkipValue: the input is already in memory, so nothing is copied, and
// consuming a whole value at once is much faster than token by token.
func (d *refDecoder) skip() error {
	if _, err := d.dec.ReadValue(); err != nil {
		return refParseError(err)
	}
	return nil
}

// beginObject consumes the '{' that PeekKind reported.
func (d *refDecoder) beginObject() error {
	if _, err := d.dec.ReadToken(); err != nil {
		return refParseError(err)
	}
	return nil
}

// more reports whether another member follows in the current object, and
// consumes the closing '}' when none does. A syntax error makes it report
// true so that the next read returns the error.
func (d *refDecoder) more() (bool, error) {
	if d.dec.PeekKind() != '}' {
		return true, nil
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return false, refParseError(err)
	}
	return false, nil
}

// fail records a JSON-RPC violation. Parsing goes on, because malformed
// JSON anywhere in the message takes precedence (JSON-RPC 2.0, section 5.1:
// a parse error is reported when the text cannot be parsed at all).
func (d *refDecoder) fail(format string, args ...any) {
	if d.invalid == nil {
		d.invalid = fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
	}
}

// finish checks that nothing but whitespace follows the top-level value.
func (d *refDecoder) finish(b []byte) error {
	for _, c := range b[d.dec.InputOffset():] {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return fmt.Errorf("%w: trailing data after message", ErrParse)
		}
	}
	return nil
}

// refParseError turns a jsontext error into one wrapping ErrParse that says
// what is wrong.
func refParseError(err error) error {
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

// refParse is Parse as it was before scan.go, kept as the reference for
// FuzzParseAgreesWithReference. It validates the whole input with jsontext
// and, unlike Parse, rejects duplicate names at every depth.
func refParse(b []byte) (Message, error) {
	d := getRefDecoder(b)
	m, err := d.parse(b)
	putRefDecoder(d)
	if err != nil {
		return Message{Raw: b}, err
	}
	return m, nil
}

func (d *refDecoder) parse(b []byte) (Message, error) {
	m := Message{Raw: b}
	switch k := d.dec.PeekKind(); k {
	case '{':
	case 0: // empty input or a syntax error
		if _, err := d.dec.ReadToken(); err != nil {
			return m, refParseError(err)
		}
		return m, fmt.Errorf("%w: no JSON value", ErrParse) // unreachable in practice
	default:
		if _, err := d.dec.ReadValue(); err != nil {
			return m, refParseError(err)
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
			switch k, start := d.dec.PeekKind(), d.valueStart(); k {
			case '{':
				err = d.params(&m)
				m.Params = Span{Start: start, End: int(d.dec.InputOffset())}
			case '[':
				err = d.skip()
				m.Params = Span{Start: start, End: int(d.dec.InputOffset())}
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
		if m.CancelRequestID.Present() && !m.MethodIs(protocol.NotificationCancelled) {
			m.CancelRequestID = Span{}
		}
		if d.token.Present() && m.MethodIs(protocol.NotificationProgress) {
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
		m.CancelRequestID, m.Task, m.Params, m.Meta = Span{}, Span{}, Span{}, Span{}
	default:
		return m, fmt.Errorf(`%w: missing "method" (request or notification) or "id" (response)`, ErrInvalidRequest)
	}
	return m, nil
}

// params walks the params object, looking only at _meta.progressToken and
// requestId. requestId is kept whatever the method (which may come later);
// parse drops it unless the method is notifications/cancelled.
func (d *refDecoder) params(m *Message) error {
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
				start := d.valueStart()
				err = d.meta(m)
				m.Meta = Span{Start: start, End: int(d.dec.InputOffset())}
			} else {
				err = d.skip()
			}
		case "requestId":
			m.CancelRequestID, err = d.readIDLike()
		case "progressToken":
			d.token, err = d.readIDLike()
		case "task":
			_, m.Task, err = d.readValue()
		default:
			err = d.skip()
		}
		if err != nil {
			return err
		}
	}
}

// meta walks params._meta, looking only at progressToken.
func (d *refDecoder) meta(m *Message) error {
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
func (d *refDecoder) readIDLike() (Span, error) {
	v, span, err := d.readValue()
	if err != nil {
		return Span{}, err
	}
	if k := v.Kind(); k != '"' && k != '0' {
		return Span{}, nil
	}
	return span, nil
}

// FuzzParseAgreesWithReference checks Parse against refParse: the same
// Message and the same error class whenever refParse accepts the JSON, and,
// where the two differ, that the only cause is a duplicate name in a value
// Parse passes through.
func FuzzParseAgreesWithReference(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add(request(1 << 10))
	f.Add(wideObject(1 << 10))
	f.Add(echoRequest(100, true))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		want, werr := refParse(b)
		switch {
		case werr == nil:
			if err != nil {
				t.Fatalf("Parse: %v; the reference accepts it", err)
			}
			if m.Kind != want.Kind || m.ID != want.ID || m.Method != want.Method ||
				m.ProgressToken != want.ProgressToken || m.CancelRequestID != want.CancelRequestID || m.Task != want.Task ||
				m.Params != want.Params || m.Meta != want.Meta ||
				m.IsError != want.IsError || &m.Raw[0] != &b[0] || len(m.Raw) != len(b) {
				t.Fatalf("Parse = %+v, the reference %+v", m, want)
			}
		case errors.Is(werr, ErrInvalidRequest):
			if err == nil || err.Error() != werr.Error() {
				t.Fatalf("Parse: %v; the reference: %v", err, werr)
			}
		case !lax(b):
			if !errors.Is(err, ErrParse) {
				t.Fatalf("Parse: %v; the reference: %v", err, werr)
			}
		default: // valid JSON with a duplicate name somewhere
			if !strings.Contains(werr.Error(), "duplicate key") {
				t.Fatalf("reference: %v for JSON that jsontext accepts with duplicates", werr)
			}
			if errors.Is(err, ErrParse) && !strings.Contains(err.Error(), "duplicate key") {
				t.Fatalf("Parse: %v for JSON that jsontext accepts with duplicates", err)
			}
		}
	})
}
