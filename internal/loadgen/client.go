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
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
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
