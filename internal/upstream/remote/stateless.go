package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// This file is the client side of the stateless revision (2026-07-28,
// basic/transports/streamable-http.mdx): no session and no initialize;
// every request is a POST of its own, carrying the revision's headers, and
// its answer comes back on that POST's response, a JSON body or an SSE
// stream scoped to the request. Since nothing outlives a request, one
// Stateless serves any number of callers at once and never rewrites ids:
// the reply on a POST's response can only be that POST's. Closing the
// response stream is how the revision cancels a request.

// ErrNotModern is matched (errors.Is) by the error of [Stateless.Discover]
// when the server answered, but not as a server of the 2026-07-28 revision:
// a verdict about the server, unlike a network error or a 5xx, which say
// nothing about it.
var ErrNotModern = errors.New("remote: server does not speak protocol version " + protocol.StatelessVersion)

// discoverTimeout bounds a Discover whose ctx has no deadline: the revision
// asks for "a reasonable timeout" without a number; a remote server may sit
// behind a slower network than a local process (whose probe waits 5s).
const discoverTimeout = 10 * time.Second

// drainWait is how long an SSE response is read on after its reply (the
// revision says the final response SHOULD end the stream, and it usually
// follows at once) so that its connection can be reused; a server that
// keeps the stream open past it has its connection closed instead.
const drainWait = 100 * time.Millisecond

// Stateless sends requests of the 2026-07-28 revision to one remote server.
// It is safe for concurrent use; it starts no goroutines of its own (each
// call runs on its caller's) and holds no state but the HTTP client's idle
// connections, which Close releases.
type Stateless struct {
	// Static after NewStateless.
	cfg   Config // defaults applied
	log   *slog.Logger
	hc    *http.Client
	ownHC bool     // hc is ours: Close closes its idle connections
	base  *url.URL // cfg.URL parsed
}

// NewStateless validates cfg and returns a Stateless. cfg is a Client's
// configuration; its Transport must not be TransportSSE (the legacy
// transport has no stateless requests). RequestTimeout bounds the wait for
// response headers only for a call whose ctx has no deadline (a
// subscriptions/listen, typically); MaxMessageBytes bounds a JSON body and
// each SSE event, as for a Client. It does not touch the network.
func NewStateless(cfg Config) (*Stateless, error) {
	base, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if cfg.Transport == TransportSSE {
		return nil, fmt.Errorf("remote %s: the legacy SSE transport has no stateless requests", cfg.Name)
	}
	s := &Stateless{cfg: cfg, base: base, hc: cfg.HTTPClient, log: cfg.Logger.With("server", cfg.Name)}
	if s.hc == nil {
		s.hc, s.ownHC = defaultHTTPClient(cfg.ConnectTimeout), true
	}
	return s, nil
}

// WithHeaders returns a Stateless that sends headers (checked as
// Config.Headers are) on every request instead of Config.Headers, sharing
// s's HTTP client: per-principal credentials over one connection pool.
// Closing it does nothing; closing s releases the connections.
func (s *Stateless) WithHeaders(headers map[string]string) (*Stateless, error) {
	cfg := s.cfg
	cfg.Headers = headers
	if _, err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Stateless{cfg: cfg, log: s.log, hc: s.hc, base: s.base}, nil
}

// Close releases the idle connections of a client the Stateless made
// itself. Calls still running are not affected: their contexts bound them.
func (s *Stateless) Close() {
	if s.ownHC {
		s.hc.CloseIdleConnections()
	}
}

// discoverRequest is the server/discover a Discover POSTs: no clientInfo
// (optional: servers must not require it) and no client capabilities (the
// result does not depend on them).
var discoverRequest = []byte(`{"jsonrpc":"2.0","id":"mcpgate-discover","method":"` + protocol.MethodServerDiscover + `","params":{"_meta":{` +
	`"` + protocol.MetaProtocolVersion + `":"` + protocol.StatelessVersion + `",` +
	`"` + protocol.MetaClientCapabilities + `":{}}}}`)

// Discover asks the server whether it speaks the 2026-07-28 revision
// (server/discover, draft/server/discover.mdx) and returns its discover
// result (the raw JSON of the response's result member) when it does: when
// the result's supportedVersions lists 2026-07-28. Any other answer from
// the server (a result without that version, a JSON-RPC error such as
// -32601, a 4xx without a JSON-RPC body) is an error wrapping ErrNotModern.
// An error that is not (the server could not be reached, answered 5xx, 401,
// 403, 407, 408 or 429, timed out, or broke the stream off) says nothing
// about the server: the caller may ask again later. A ctx without a
// deadline is given one of 10s.
func (s *Stateless) Discover(ctx context.Context) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, discoverTimeout)
		defer cancel()
	}
	var reply []byte
	status, err := s.exchange(ctx, discoverRequest, nil, nil, func(msg []byte) { reply = msg })
	var se *statusError
	switch {
	case err != nil && errors.As(err, &se) && verdictStatus(se.code):
		// A refusal without a JSON-RPC body: an answer about the server.
		return nil, fmt.Errorf("%w: server/discover got HTTP %d %s", ErrNotModern, se.code, http.StatusText(se.code))
	case errors.Is(err, errNoAnswer) && verdictStatus(status):
		// A whole JSON body, but no answer to server/discover in it.
		return nil, fmt.Errorf("%w: server/discover got HTTP %d without an answer", ErrNotModern, status)
	case err != nil:
		// A reply cut off, stalled, too big or not JSON-RPC (a proxy's
		// page) says nothing about the server, whatever its status.
		return nil, fmt.Errorf("server/discover failed: %w", err)
	case status != http.StatusOK && !verdictStatus(status):
		// A JSON-RPC error sent with a status about credentials or load.
		return nil, fmt.Errorf("server/discover failed: HTTP %d %s: %s", status, http.StatusText(status), clipText(string(reply)))
	}
	var m struct {
		Result jsontext.Value `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var result struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	switch {
	case json.Unmarshal(reply, &m) != nil:
		return nil, fmt.Errorf("%w: its server/discover reply is not valid JSON-RPC", ErrNotModern)
	case m.Error != nil:
		return nil, fmt.Errorf("%w: server/discover failed: %d %s", ErrNotModern, m.Error.Code, clipText(m.Error.Message))
	case m.Result.Kind() != '{' || json.Unmarshal(m.Result, &result) != nil:
		return nil, fmt.Errorf("%w: its server/discover reply has no valid result", ErrNotModern)
	case !slices.Contains(result.SupportedVersions, protocol.StatelessVersion):
		return nil, fmt.Errorf("%w: its server/discover lists only %q", ErrNotModern, result.SupportedVersions)
	}
	return bytes.Clone(m.Result), nil
}

// verdictStatus reports whether an HTTP status says something about the
// server's revision: 2xx, or a 4xx other than those about credentials, time
// or load. A 2026-07-28 server answers server/discover with 200 (or a
// JSON-RPC error with a 4xx); a session-era one refuses a request without
// a session with some 4xx.
func verdictStatus(code int) bool {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired,
		http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return code >= 200 && code < 500
}

// Do sends the request msg (one JSON-RPC request of the 2026-07-28
// revision, sent as it is: its id and everything else untouched) and
// reports its answer: send gets each message the server sends before the
// reply (its notifications), then reply gets the reply, with msg's id. A
// request that gets no reply from the server (it could not be sent, the
// server answered an HTTP error without a JSON-RPC body, the stream ended
// first, the reply was over MaxMessageBytes) gets an error reply naming the
// cause, and a request whose ctx passed its deadline gets one saying it
// timed out. Ending ctx otherwise cancels the request (its HTTP request or
// stream is closed, which is the revision's cancellation) and reply is not
// called. A server's JSON-RPC error sent with a 4xx status is the reply
// like any other (the caller decides the status its own client sees).
//
// The headers come from msg (streamable-http.mdx, "Request Metadata"):
// MCP-Protocol-Version from params._meta's protocol version, Mcp-Method, and
// Mcp-Name for tools/call and prompts/get (params.name) and resources/read
// (params.uri), in the base64 sentinel form when not plain header-safe
// ASCII. The Mcp-Param-* headers of header (the client's POST, if the
// caller has it; nil otherwise) are sent as they are: building them needs
// the tool's inputSchema, and an intermediary "MUST forward" those it does
// not recognize.
//
// send and reply run on the caller's goroutine, never after Do returns. Do
// returns once the answer is complete; safe for concurrent use.
func (s *Stateless) Do(ctx context.Context, msg []byte, header http.Header, send, reply func(msg []byte)) {
	m, err := jsonrpc.Parse(msg)
	if err != nil || m.Kind != jsonrpc.KindRequest {
		id := []byte(nil)
		if err == nil {
			id = m.Bytes(m.ID)
		}
		reply(jsonrpc.ErrorResponse(id, protocol.CodeInvalidRequest, "mcpgate: not a JSON-RPC request"))
		return
	}
	id := m.Bytes(m.ID)
	_, err = s.exchange(ctx, msg, header, send, func(r []byte) { reply(withID(r, id)) })
	if err == nil {
		return
	}
	var se *statusError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		reply(jsonrpc.ErrorResponse(id, protocol.CodeRequestTimeout, "mcpgate: request timed out"))
	case ctx.Err() != nil:
		// Cancelled: the caller gave up on it.
	case errors.As(err, &se):
		s.log.Warn("upstream refused a request", "method", m.MethodName(), "status", se.code)
		reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError,
			fmt.Sprintf("mcpgate: upstream answered HTTP %d %s", se.code, http.StatusText(se.code))))
	case errors.Is(err, errTooLarge):
		s.log.Warn("reply from server exceeds the size limit; dropped", "method", m.MethodName(), "limit", s.cfg.MaxMessageBytes)
		reply(jsonrpc.ErrorResponse(id, protocol.CodeInternalError, "mcpgate: "+err.Error()))
	default:
		s.log.Warn("request failed", "method", m.MethodName(), "err", err)
		reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, requestFailed(err)))
	}
}

// statusError is an HTTP error status whose body was no JSON-RPC message.
type statusError struct{ code int }

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.code, http.StatusText(e.code))
}

// errTooLarge is wrapped by the error of an answer over MaxMessageBytes.
var errTooLarge = errors.New("reply exceeds the size limit")

// errNoAnswer is the error of a whole JSON body without the reply.
var errNoAnswer = errors.New("upstream replied without an answer to the request")

// errNoReply is the error of a response that ended without the reply.
var errNoReply = errors.New("upstream closed the stream before replying")

// exchange POSTs the request msg, with the Mcp-Param-* headers of header,
// and reads its answer: send (nil: dropped) gets the notifications that
// come first, final gets the reply as the server wrote it. It returns the
// response's status (0 if none came) and nil once final was called, else
// why not: a *statusError for an HTTP error without a JSON-RPC error body,
// an error wrapping errTooLarge, errNoReply, or the transport's error.
func (s *Stateless) exchange(ctx context.Context, msg []byte, header http.Header, send, final func([]byte)) (status int, err error) {
	// Until the reply, ending ctx closes the request or its stream: the
	// revision's cancellation. After it, only the drain's bound does: the
	// caller is done with the request, and usually ends ctx at once.
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	follow := context.AfterFunc(ctx, cancel)
	defer follow()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, s.base.String(), bytes.NewReader(msg))
	if err != nil {
		return 0, err // unreachable: base was parsed
	}
	for k, v := range s.cfg.Headers {
		req.Header.Set(k, v)
	}
	for k, v := range header {
		if len(k) > len(paramPrefix) && strings.EqualFold(k[:len(paramPrefix)], paramPrefix) {
			req.Header[http.CanonicalHeaderKey(k)] = slices.Clone(v)
		}
	}
	setRequestHeaders(req.Header, msg)
	headerTimeout := s.cfg.RequestTimeout
	if _, ok := ctx.Deadline(); ok {
		headerTimeout = 0 // the deadline bounds it all: a long call may answer in JSON
	}
	resp, err := roundTrip(s.hc, headerTimeout, req, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	code, mt := resp.StatusCode, mediaType(resp)
	switch {
	case code < 200 || code > 299:
		// A 2026-07-28 server sends its JSON-RPC errors with 4xx statuses
		// (404 for -32601, 400 for -32602 and -32020..-32022).
		if mt == "application/json" {
			data, _, over, err := readLimited(resp.Body, s.cfg.MaxMessageBytes)
			if err == nil && !over && isErrorResponse(data) {
				final(data)
				return code, nil
			}
		}
		drain(resp)
		return code, &statusError{code}
	case mt == "application/json":
		data, size, over, err := readLimited(resp.Body, s.cfg.MaxMessageBytes)
		switch {
		case over:
			return code, fmt.Errorf("%w (%d bytes and more)", errTooLarge, size)
		case err != nil:
			return code, fmt.Errorf("reading the upstream reply: %w", err)
		}
		if reply := findReply(data); reply != nil {
			final(reply)
			return code, nil
		}
		return code, errNoAnswer
	case isEventStream(mt):
		// From the reply on, ending ctx no longer cuts the stream: the
		// caller may end it as it takes the reply (the call table ends a
		// call's context before delivering its answer).
		if err := s.readStream(resp.Body, send, func(r []byte) { follow(); final(r) }); err != nil {
			return code, err
		}
		// The reply is out; read on briefly for the stream's end, so that
		// its connection may serve the next request.
		stop := time.AfterFunc(drainWait, cancel)
		defer stop.Stop()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return code, nil
	}
	drain(resp)
	return code, fmt.Errorf("upstream replied with HTTP %d and content type %q", code, resp.Header.Get("Content-Type"))
}

// readStream reads an SSE response until its reply, which it hands to
// final; notifications go to send. A server request (which the revision
// forbids on a response stream) and messages that are not JSON-RPC are
// dropped. It returns nil once final was called.
func (s *Stateless) readStream(body io.Reader, send, final func([]byte)) error {
	tap := &prefixTap{r: body, limit: s.cfg.MaxMessageBytes}
	r := sse.NewReader(tap, s.cfg.MaxMessageBytes)
	for {
		ev, err := r.Next()
		switch {
		case errors.Is(err, sse.ErrEventTooLarge) || errors.Is(err, errRawTooLarge):
			return fmt.Errorf("%w (an event of %d bytes and more)", errTooLarge, max(tap.n, s.cfg.MaxMessageBytes+1))
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return errNoReply
		case err != nil:
			return fmt.Errorf("%w: %w", errNoReply, err)
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 || (ev.Event != "" && ev.Event != "message") {
			continue
		}
		msgs := [][]byte{ev.Data}
		if jsonrpc.IsBatch(ev.Data) {
			msgs, _ = jsonrpc.SplitBatch(ev.Data)
		}
		for _, data := range msgs {
			m, err := jsonrpc.Parse(data)
			switch {
			case err != nil:
				s.log.Debug("non-JSON-RPC event on a response stream dropped", "err", err)
			case m.Kind == jsonrpc.KindResponse:
				final(data)
				return nil
			case m.Kind == jsonrpc.KindNotification:
				if send != nil {
					send(data)
				}
			default:
				s.log.Debug("server request on a response stream dropped", "method", m.MethodName())
			}
		}
	}
}

// paramPrefix starts the names of the headers that mirror tool arguments
// annotated x-mcp-header.
const paramPrefix = "Mcp-Param-"

// setRequestHeaders sets the headers of a 2026-07-28 POST carrying msg.
func setRequestHeaders(h http.Header, msg []byte) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	// Values of an unexpected type (the caller checked the message
	// already) only leave their headers out, for the server to refuse.
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name jsontext.Value `json:"name"`
			URI  jsontext.Value `json:"uri"`
			Meta struct {
				Version jsontext.Value `json:"io.modelcontextprotocol/protocolVersion"`
			} `json:"_meta"`
		} `json:"params"`
	}
	_ = json.Unmarshal(msg, &m)
	version, ok := stringValue(m.Params.Meta.Version)
	if !ok {
		version = protocol.StatelessVersion
	}
	h.Set(eras.HeaderProtocolVersion, headerSafe(version))
	h.Set(eras.HeaderMethod, headerSafe(m.Method))
	name := m.Params.Name
	switch m.Method {
	case protocol.MethodResourcesRead:
		name = m.Params.URI
		fallthrough
	case protocol.MethodToolsCall, protocol.MethodPromptsGet:
		if v, ok := stringValue(name); ok {
			h.Set(eras.HeaderName, eras.EncodeHeaderValue(v))
		}
	}
}

// stringValue returns the string a JSON value holds, if it is one.
func stringValue(v jsontext.Value) (string, bool) {
	var s string
	if v.Kind() != '"' || json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// headerSafe returns v without the bytes a header value cannot hold,
// control characters but tab (RFC 9110, 5.5; a method name the caller
// checked against its own Mcp-Method header has none, and the server would
// refuse the mismatch).
func headerSafe(v string) string {
	return strings.Map(func(r rune) rune {
		if (r < ' ' && r != '\t') || r == 0x7f {
			return -1
		}
		return r
	}, v)
}

// isErrorResponse reports whether data is one JSON-RPC error response.
func isErrorResponse(data []byte) bool {
	m, err := jsonrpc.Parse(data)
	return err == nil && m.Kind == jsonrpc.KindResponse && m.IsError
}

// findReply returns the response in a JSON body: the body itself, or the
// first response of a batch; nil if there is none.
func findReply(data []byte) []byte {
	msgs := [][]byte{data}
	if jsonrpc.IsBatch(data) {
		msgs, _ = jsonrpc.SplitBatch(data)
	}
	for _, d := range msgs {
		if m, err := jsonrpc.Parse(d); err == nil && m.Kind == jsonrpc.KindResponse {
			return d
		}
	}
	return nil
}

// withID returns reply with the request's raw id: a server may write the
// id back re-encoded (a string with escapes), or, for an error, as null.
func withID(reply, id []byte) []byte {
	m, err := jsonrpc.Parse(reply)
	if err != nil || bytes.Equal(m.Bytes(m.ID), id) {
		return reply
	}
	return jsonrpc.Splice(nil, reply, jsonrpc.Edit{Span: m.ID, Value: id})
}

// clipText shortens a server's error message for an error of ours.
func clipText(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
