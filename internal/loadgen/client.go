package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// Outcome errors a call can have besides transport failures. A reply that
// is a well-formed echo result for someone else is errCrossed, never an
// error; one for this call whose text is damaged after its unique part is
// errMangled, an error. A result whose text carries no message of the
// run at all is errNotEchoed, neither: the server's echo tool does not
// return its message, so no reply can be checked (not a routing bug).
var (
	errCrossed    = errors.New("crossed reply: id or echoed text belongs to another call")
	errNotEchoed  = errors.New("the server's echo tool does not return its message: replies cannot be checked")
	errMangled    = errors.New("echoed text differs from the message after its unique part")
	errNoReply    = errors.New("response ended without a JSON-RPC reply")
	errRPCError   = errors.New("JSON-RPC error reply")
	errResultType = errors.New(`result of a stateless request without "resultType":"complete"`)
)

// statelessVersion is the first protocol revision without initialize or
// sessions. The load generator spells out the revision's names itself,
// rather than sharing the gateway's internal/eras, so that it checks the
// gateway instead of agreeing with it.
const statelessVersion = "2026-07-28"

// Stateless reports whether protocol version v is of the stateless
// revision (2026-07-28) or later, compared as dates, as the Go SDK does:
// its clients send no initialize and have no session. Every request then
// names the version in params._meta and in the MCP-Protocol-Version
// header, and its method in Mcp-Method.
func Stateless(v string) bool { return v >= statelessVersion }

// Header values shared read-only by every request (the transport only
// reads them).
var (
	methodToolsCall = []string{"tools/call"}
	methodDiscover  = []string{"server/discover"}
	nameEcho        = []string{"echo"}
)

// maxReplyBytes bounds the body of one reply.
const maxReplyBytes = 16 << 20

// endpoint is what every session of a run shares: the client and the
// request parameters.
type endpoint struct {
	client  *http.Client
	url     string
	header  http.Header // extra headers, sent on every request
	version string      // protocol version asked for in initialize, or of every stateless request
	// stateless: version is of the stateless revision; meta is then the
	// _meta member that opens every request's params (with its comma).
	stateless bool
	meta      []byte
}

// newEndpoint returns the endpoint of a run at url speaking version.
func newEndpoint(client *http.Client, url string, header http.Header, version string) *endpoint {
	ep := &endpoint{client: client, url: url, header: header, version: version, stateless: Stateless(version)}
	if ep.stateless {
		ep.meta = fmt.Appendf(nil, `"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{}},`, version)
	}
	return ep
}

// newTransport returns a transport that keeps conns idle connections to the
// one host under test, so that every caller keeps its own connection.
func newTransport(conns int) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // 127.0.0.1 is benchmarked directly, whatever the environment says
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// session is one open MCP session. A stateless client (ep.stateless) has
// none: it is then one client of the run, opened by server/discover, whose
// requests stand alone.
type session struct {
	ep      *endpoint
	id      string // Mcp-Session-Id; "" for a stateless client
	version string // negotiated; a stateless client's: ep.version
	// nextID numbers the session's requests after initialize (id 0): every
	// caller of the session takes its ids from it, so none is used twice.
	nextID atomic.Int64
}

func (ep *endpoint) newRequest(ctx context.Context, method, sessionID, version string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, ep.url, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range ep.header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	return req, nil
}

// open initializes a session and sends notifications/initialized; for a
// stateless version it sends server/discover instead (see discover).
func (ep *endpoint) open(ctx context.Context) (*session, error) {
	if ep.stateless {
		return ep.discover(ctx)
	}
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,`+
		`"capabilities":{},"clientInfo":{"name":"mcpgate-bench","version":"1"}}}`, ep.version)
	req, err := ep.newRequest(ctx, http.MethodPost, "", "", body)
	if err != nil {
		return nil, err
	}
	resp, err := ep.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	reply, err := readReply(resp, nil)
	closeBody(resp)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	m, _ := jsonrpc.Parse(reply)
	if m.IsError || string(m.Bytes(m.ID)) != "0" {
		return nil, fmt.Errorf("initialize: unexpected reply %.200s", reply)
	}
	s := &session{ep: ep, id: resp.Header.Get("Mcp-Session-Id")}
	if s.id == "" {
		return nil, errors.New("initialize: no Mcp-Session-Id in the reply")
	}
	v, err := lookup(reply, "result", "protocolVersion")
	if err != nil || len(v) == 0 {
		s.close(ctx)
		return nil, fmt.Errorf("initialize: no result.protocolVersion in %.200s", reply)
	}
	s.version = string(v)
	if err := s.notify(ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		s.close(ctx)
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return s, nil
}

// discover opens a stateless client: one server/discover, whose result
// must list the version asked for.
func (ep *endpoint) discover(ctx context.Context) (*session, error) {
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{`+
		`"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{},`+
		`"io.modelcontextprotocol/clientInfo":{"name":"mcpgate-bench","version":"1"}}}}`, ep.version)
	req, err := ep.newRequest(ctx, http.MethodPost, "", ep.version, body)
	if err != nil {
		return nil, err
	}
	req.Header["Mcp-Method"] = methodDiscover
	resp, err := ep.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("server/discover: %w", err)
	}
	reply, err := readReply(resp, nil)
	closeBody(resp)
	if err != nil {
		return nil, fmt.Errorf("server/discover: %w", err)
	}
	var r struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(reply, &r); err != nil || string(r.ID) != "0" || r.Result == nil {
		return nil, fmt.Errorf("server/discover: unexpected reply %.200s", reply)
	}
	if !slices.Contains(r.Result.SupportedVersions, ep.version) {
		return nil, fmt.Errorf("server/discover: supportedVersions %q lacks %s", r.Result.SupportedVersions, ep.version)
	}
	return &session{ep: ep, version: ep.version}, nil
}

// notify posts a notification and expects 202 (any 2xx is accepted).
func (s *session) notify(ctx context.Context, msg string) error {
	req, err := s.ep.newRequest(ctx, http.MethodPost, s.id, s.version, []byte(msg))
	if err != nil {
		return err
	}
	resp, err := s.ep.client.Do(req)
	if err != nil {
		return err
	}
	closeBody(resp)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP status %s", resp.Status)
	}
	return nil
}

// close deletes the session; errors are ignored (the server may have
// expired it already). A stateless client has nothing to delete.
func (s *session) close(ctx context.Context) {
	if s.id == "" {
		return
	}
	req, err := s.ep.newRequest(ctx, http.MethodDelete, s.id, s.version, nil)
	if err != nil {
		return
	}
	if resp, err := s.ep.client.Do(req); err == nil {
		closeBody(resp)
	}
}

// openStream opens the session's GET stream; the caller closes the body.
func (s *session) openStream(ctx context.Context) (*http.Response, error) {
	req, err := s.ep.newRequest(ctx, http.MethodGet, s.id, s.version, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.ep.client.Do(req)
	if err != nil {
		return nil, err
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		closeBody(resp)
		return nil, fmt.Errorf("GET stream: HTTP status %s, Content-Type %q", resp.Status, ct)
	}
	return resp, nil
}

// scratch is a caller's reusable buffers. The request body and the reply
// are kept apart: the transport may still hold the body when Do returns.
type scratch struct {
	body, reply []byte
}

// call sends one tools/call echo of msg with request id id and checks the
// reply; the first unique bytes of msg tell this call from every other. A
// stateless client's call carries the revision's _meta and headers, and
// its result must be "complete".
func (s *session) call(ctx context.Context, id int64, msg []byte, unique int, sc *scratch) error {
	buf := append(sc.body[:0], `{"jsonrpc":"2.0","id":`...)
	buf = strconv.AppendInt(buf, id, 10)
	buf = append(buf, `,"method":"tools/call","params":{`...)
	buf = append(buf, s.ep.meta...)
	buf = append(buf, `"name":"echo","arguments":{"message":"`...)
	buf = append(buf, msg...) // plain ASCII: no escaping needed
	buf = append(buf, `"}}}`...)
	sc.body = buf
	req, err := s.ep.newRequest(ctx, http.MethodPost, s.id, s.version, buf)
	if err != nil {
		return err
	}
	if s.ep.stateless {
		req.Header["Mcp-Method"] = methodToolsCall
		req.Header["Mcp-Name"] = nameEcho
	}
	resp, err := s.ep.client.Do(req)
	if err != nil {
		return err
	}
	reply, err := readReply(resp, sc.reply[:0])
	closeBody(resp)
	sc.reply = reply
	if err != nil {
		return err
	}
	return checkEcho(reply, id, msg, unique, s.ep.stateless)
}

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
