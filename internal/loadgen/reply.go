package loadgen

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// Reading and checking a reply: its body (JSON or an SSE stream), the echo
// check that tells a call's own reply from a crossed one, and the pooled
// JSON decoder that finds a few members in one pass without copying.

// maxReplyBytes bounds the body of one reply.
const maxReplyBytes = 16 << 20

// checkEcho classifies a reply to the call (id, msg): nil if it is its
// own, errCrossed if it is a well-formed result for another call (its id
// differs, or its text carries another call's message of the run and not
// this one's), errNotEchoed if its text carries no message of the run at
// all, errMangled if it is this call's but the text differs from msg (the
// message damaged, or wrapped: "Echo: ..."), errResultType if it is this
// call's but, the call being stateless, without "resultType":"complete";
// otherwise an error.
func checkEcho(reply []byte, id int64, msg []byte, unique int, stateless bool) error {
	m, err := jsonrpc.Parse(reply)
	if err != nil {
		return err
	}
	if m.Kind != jsonrpc.KindResponse {
		return fmt.Errorf("reply is a %s", m.Kind)
	}
	if m.IsError {
		return fmt.Errorf("%w: %.200s", errRPCError, reply)
	}
	text, resultType, err := echoResult(reply)
	if err != nil || text == nil {
		return fmt.Errorf("reply has no result.content[0].text: %.200s", reply)
	}
	var idb [20]byte
	if !bytes.Equal(m.Bytes(m.ID), strconv.AppendInt(idb[:0], id, 10)) {
		return errCrossed
	}
	switch whose(text, msg, unique) {
	case echoOther:
		return errCrossed
	case echoNone:
		return errNotEchoed
	}
	switch {
	case stateless && string(resultType) != "complete":
		return fmt.Errorf("%w: resultType %q", errResultType, resultType)
	case !bytes.Equal(text, msg):
		return fmt.Errorf("%w: %d bytes, want %d", errMangled, len(text), len(msg))
	}
	return nil
}

// readReply returns the first JSON-RPC response in resp: the JSON body, or
// the first SSE event whose data is a response (priming events, events
// without data and other messages are skipped). It appends to dst.
func readReply(resp *http.Response, dst []byte) ([]byte, error) {
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return dst, fmt.Errorf("HTTP status %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		b := bytes.NewBuffer(dst)
		if _, err := b.ReadFrom(io.LimitReader(resp.Body, maxReplyBytes)); err != nil {
			return dst, fmt.Errorf("reading reply: %w", err)
		}
		return b.Bytes(), nil
	case "text/event-stream":
		r := sse.NewReader(resp.Body, maxReplyBytes)
		for {
			ev, err := r.Next()
			if err == io.EOF {
				return dst, errNoReply
			}
			if err != nil {
				return dst, fmt.Errorf("reading SSE: %w", err)
			}
			if len(ev.Data) == 0 {
				continue
			}
			if m, err := jsonrpc.Parse(ev.Data); err == nil && m.Kind != jsonrpc.KindResponse {
				continue // a notification or server request before the reply
			}
			return append(dst, ev.Data...), nil
		}
	}
	return dst, fmt.Errorf("unexpected Content-Type %q", ct)
}

// closeBody reads what is left of a response (bounded) so that its
// connection can be reused, and closes it.
func closeBody(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// lookup returns the unquoted string at path in the JSON text raw, nil if
// there is none. A path element "[0]" steps into the first element of an
// array; others name object members. A string without escapes is returned
// as a slice of raw (an echoed megabyte is not copied); others are copied.
func lookup(raw []byte, path ...string) ([]byte, error) {
	d := decoders.Get().(*decoder)
	d.raw = raw
	d.buf = *bytes.NewBuffer(raw)
	d.dec.Reset(&d.buf)
	v, err := d.find(path)
	d.raw, d.buf = nil, bytes.Buffer{}
	d.dec.Reset(&d.buf)
	decoders.Put(d)
	return v, err
}

// echoResult returns result.content[0].text and result.resultType of the
// JSON text raw, each nil if absent or not a string, in one pass: a
// megabyte echo is read once whichever comes first. Strings are returned
// as by lookup.
func echoResult(raw []byte) (text, resultType []byte, err error) {
	d := decoders.Get().(*decoder)
	d.raw = raw
	d.buf = *bytes.NewBuffer(raw)
	d.dec.Reset(&d.buf)
	err = d.members(func(name []byte) error {
		if string(name) != "result" {
			return d.skip()
		}
		return d.members(func(name []byte) error {
			switch string(name) {
			case "resultType":
				resultType, err = d.str()
				return err
			case "content":
				text, err = d.firstText()
				return err
			}
			return d.skip()
		})
	})
	d.raw, d.buf = nil, bytes.Buffer{}
	d.dec.Reset(&d.buf)
	decoders.Put(d)
	return text, resultType, err
}

// members reads an object, calling member for each name with the decoder
// at its value, which member must consume; anything else is skipped.
func (d *decoder) members(member func(name []byte) error) error {
	if d.dec.PeekKind() != '{' {
		return d.skip()
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return err
	}
	for d.dec.PeekKind() != '}' {
		name, err := d.dec.ReadValue()
		if err != nil {
			return err
		}
		u := name[1 : len(name)-1]
		if bytes.IndexByte(u, '\\') >= 0 {
			u, _ = jsontext.AppendUnquote(nil, name)
		}
		if err := member(u); err != nil {
			return err
		}
	}
	_, err := d.dec.ReadToken()
	return err
}

// firstText reads an array and returns the text member of its first
// element (nil if none).
func (d *decoder) firstText() (text []byte, err error) {
	if d.dec.PeekKind() != '[' {
		return nil, d.skip()
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return nil, err
	}
	if d.dec.PeekKind() == '{' {
		err = d.members(func(name []byte) error {
			if string(name) != "text" {
				return d.skip()
			}
			text, err = d.str()
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	for d.dec.PeekKind() != ']' {
		if err := d.skip(); err != nil {
			return nil, err
		}
	}
	_, err = d.dec.ReadToken()
	return text, err
}

// str reads the next value and returns it unquoted if it is a string
// (as find does), else nil.
func (d *decoder) str() ([]byte, error) {
	if d.dec.PeekKind() != '"' {
		return nil, d.skip()
	}
	return d.find(nil)
}

func (d *decoder) skip() error {
	_, err := d.dec.ReadValue()
	return err
}

type decoder struct {
	raw []byte // the text being decoded, for slicing out strings
	buf bytes.Buffer
	dec jsontext.Decoder
}

var decoders = sync.Pool{New: func() any { return new(decoder) }}

func (d *decoder) find(path []string) ([]byte, error) {
	if len(path) == 0 {
		if d.dec.PeekKind() != '"' {
			return nil, nil
		}
		v, err := d.dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if bytes.IndexByte(v, '\\') < 0 {
			end := int(d.dec.InputOffset()) // just past the closing quote
			return d.raw[end-len(v)+1 : end-1 : end-1], nil
		}
		return jsontext.AppendUnquote(nil, v)
	}
	switch d.dec.PeekKind() {
	case '{':
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		for d.dec.PeekKind() != '}' {
			name, err := d.dec.ReadValue()
			if err != nil {
				return nil, err
			}
			u := name[1 : len(name)-1]
			if bytes.IndexByte(u, '\\') >= 0 {
				u, _ = jsontext.AppendUnquote(nil, name)
			}
			if string(u) == path[0] {
				return d.find(path[1:])
			}
			if _, err := d.dec.ReadValue(); err != nil {
				return nil, err
			}
		}
	case '[':
		if path[0] != "[0]" {
			return nil, nil
		}
		if _, err := d.dec.ReadToken(); err != nil {
			return nil, err
		}
		if d.dec.PeekKind() != ']' {
			return d.find(path[1:])
		}
	}
	return nil, nil
}
