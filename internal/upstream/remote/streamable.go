package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// This file is the Streamable HTTP transport (MCP 2025-03-26 and later,
// basic/transports "Streamable HTTP"): one POST per message, replies as a
// JSON body or an SSE stream, resumption with GET and Last-Event-ID, the
// session header, a standalone GET stream, and DELETE at the end.

// session is one upstream Streamable HTTP session.
type session struct {
	id      string // Mcp-Session-Id; "" for a server without sessions
	version string // negotiated protocol version, sent as MCP-Protocol-Version
	epoch   uint64 // bumped for each new session
	stopGET context.CancelFunc
}

// outcome is what postHTTP tells run.
type outcome uint8

const (
	handled  outcome = iota
	fallBack         // auto: the server is not Streamable HTTP; use legacy SSE
)

// reinitSeq numbers the Client's own initialize requests.
var reinitSeq atomic.Uint64

// postHTTP POSTs one message and delivers what comes back. retry allows one
// transparent re-initialization when the session has expired.
func (c *Client) postHTTP(o *outgoing, retry bool) outcome {
	isInit := o.method == protocol.MethodInitialize
	c.mu.Lock()
	sess := c.sess
	c.mu.Unlock()
	if isInit {
		sess = session{} // a new session starts without the old headers
	}
	// The next message may start once a request is written, except after
	// an initialize: what follows needs the session id of its answer.
	var onWritten func()
	if o.kind == jsonrpc.KindRequest && !isInit {
		onWritten = o.release
	}
	req := c.newRequest(o.ctx, http.MethodPost, c.base, o.body, sess)
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.do(req, onWritten)
	if !isInit {
		o.release()
	}
	if err != nil {
		if !ctxDone(c.ctx) {
			c.fail(o.gen, o.id, protocol.CodeServerError, requestFailed(err))
		}
		return handled
	}
	defer resp.Body.Close()
	code := resp.StatusCode
	switch {
	case o.probe && (code == http.StatusBadRequest || code == http.StatusNotFound || code == http.StatusMethodNotAllowed):
		drain(resp)
		return fallBack
	case code >= 400 && code < 500 && !o.probe && o.id != nil && c.errorAnswer(o, resp):
		// The server answered the request with its error (a 2026-07-28-
		// aware server gives -32601 with 404): that is the answer, not an
		// expired session.
		return handled
	case code == http.StatusNotFound && sess.id != "" && retry:
		drain(resp)
		if c.reinit(sess) {
			return c.postHTTP(o, false)
		}
		c.fail(o.gen, o.id, protocol.CodeServerError, "mcpgate: upstream session expired and could not be renewed")
		return handled
	case code < 200 || code > 299:
		drain(resp)
		if o.id == nil {
			c.log.Warn("upstream refused a message", "method", o.method, "status", code)
		}
		c.fail(o.gen, o.id, protocol.CodeServerError, fmt.Sprintf("mcpgate: upstream answered HTTP %d %s", code, http.StatusText(code)))
		return handled
	}
	if o.probe {
		c.decide(modeHTTP)
	}
	if isInit {
		c.newSession(resp.Header.Get("Mcp-Session-Id"))
		o.release()
	}
	if o.method == protocol.NotificationInitialized {
		c.startGET()
	}
	switch mt := mediaType(resp); {
	case code == http.StatusAccepted || resp.ContentLength == 0:
		drain(resp)
	case mt == "application/json":
		c.readJSON(o, resp)
	case isEventStream(mt):
		c.readPostStream(o, resp)
	default:
		drain(resp)
		c.fail(o.gen, o.id, protocol.CodeServerError, fmt.Sprintf("mcpgate: upstream replied with content type %q", resp.Header.Get("Content-Type")))
	}
	return handled
}

// readJSON delivers a JSON reply body (one message or a batch). A body over
// MaxMessageBytes is not read further: the caller closes it.
// errorAnswer delivers a 4xx response's body when it is a JSON-RPC error
// response to o's request (its id, not null), and reports whether it was.
// Anything else is left to the caller (the body may be consumed).
func (c *Client) errorAnswer(o *outgoing, resp *http.Response) bool {
	if mediaType(resp) != "application/json" {
		return false
	}
	data, _, over, err := readLimited(resp.Body, 64<<10)
	if over || err != nil {
		return false
	}
	msg, err := jsonrpc.Parse(bytes.TrimSpace(data))
	if err != nil || msg.Kind != jsonrpc.KindResponse || !msg.IsError || !bytes.Equal(msg.Bytes(msg.ID), o.id) {
		return false
	}
	c.deliver(o.gen, data)
	return true
}

func (c *Client) readJSON(o *outgoing, resp *http.Response) {
	data, size, over, err := readLimited(resp.Body, c.cfg.MaxMessageBytes)
	switch {
	case over:
		c.oversized(o.gen, data, size)
		c.fail(o.gen, o.id, protocol.CodeInternalError, fmt.Sprintf("mcpgate: reply of %d bytes exceeds the size limit", size))
	case err != nil:
		if !ctxDone(c.ctx) {
			c.fail(o.gen, o.id, protocol.CodeServerError, "mcpgate: reading the upstream reply: "+err.Error())
		}
	case len(bytes.TrimSpace(data)) > 0:
		c.deliver(o.gen, data)
	}
}

// readPostStream delivers the SSE stream a POST answered with. If it ends
// before the reply to the POSTed request, it is resumed from its last event
// id with GET; a stream that cannot be resumed gets an error reply for the
// request, so that its sender is not left waiting. An event over the size
// limit ends the stream for good: the server would send it again.
func (c *Client) readPostStream(o *outgoing, resp *http.Response) {
	var st streamState
	_, _ = c.readEvents(o.gen, resp.Body, &st, nil)
	resp.Body.Close()
	for failures := 0; o.id != nil && !st.oversized && c.awaiting(o.id) && st.lastID != "" && failures < maxResumes; {
		if !sleep(o.ctx, retryDelay(st.retry, failures)) {
			return
		}
		n, status := c.resume(o.ctx, o.gen, &st)
		switch {
		case status == http.StatusNotFound, status == http.StatusMethodNotAllowed,
			status >= 400 && status < 500:
			failures = maxResumes // cannot be resumed
		case n > 0:
			failures = 0
		default:
			failures++
		}
	}
	if o.id == nil || ctxDone(c.ctx) {
		return
	}
	if st.oversized {
		c.fail(o.gen, o.id, protocol.CodeInternalError, "mcpgate: reply exceeds the size limit")
		return
	}
	c.fail(o.gen, o.id, protocol.CodeServerError, "mcpgate: upstream closed the stream before replying")
}

// resume GETs the stream st was reading from its last event id and reads
// it, until ctx ends. It returns how many messages were delivered and the
// HTTP status (0 if there was none).
func (c *Client) resume(ctx context.Context, gen uint64, st *streamState) (delivered, status int) {
	c.mu.Lock()
	sess := c.sess
	c.mu.Unlock()
	resp, err := c.get(ctx, sess, st.lastID)
	if err != nil {
		c.log.Debug("resuming a stream failed", "err", err)
		return 0, 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !isEventStream(mediaType(resp)) {
		drain(resp)
		return 0, resp.StatusCode
	}
	n, _ := c.readEvents(gen, resp.Body, st, nil)
	return n, resp.StatusCode
}

// get opens an SSE stream at the MCP endpoint.
func (c *Client) get(ctx context.Context, sess session, lastID string) (*http.Response, error) {
	req := c.newRequest(ctx, http.MethodGet, c.base, nil, sess)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return c.do(req, nil)
}

// newSession records the session an initialize reply started, ending the
// standalone stream of the previous one.
func (c *Client) newSession(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess.stopGET != nil {
		c.sess.stopGET()
	}
	c.sess = session{id: id, epoch: c.sess.epoch + 1}
}

// setVersion records the protocol version the server agreed to.
func (c *Client) setVersion(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sess.version = v
}

// curGen returns the current generation.
func (c *Client) curGen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// reinit replaces the expired session old with a new one by replaying the
// last initialize the owner sent (its reply is not delivered) and
// notifications/initialized. It reports whether a session is in place;
// concurrent callers for the same expired session share one renewal.
func (c *Client) reinit(old session) bool {
	c.reinitMu.Lock()
	defer c.reinitMu.Unlock()
	c.mu.Lock()
	cur, params := c.sess, c.init
	c.mu.Unlock()
	if cur.epoch != old.epoch {
		return cur.id != "" // renewed by another caller meanwhile
	}
	if params == nil {
		return false
	}
	c.log.Info("upstream session expired; starting a new one")
	id := fmt.Appendf(nil, `"mcpgate-reinit-%d"`, reinitSeq.Add(1))
	req := c.newRequest(c.ctx, http.MethodPost, c.base, jsonrpc.Request(id, protocol.MethodInitialize, params), session{})
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.do(req, nil)
	if err != nil {
		c.log.Warn("renewing the upstream session failed", "err", err)
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		drain(resp)
		c.log.Warn("renewing the upstream session failed", "status", resp.StatusCode)
		return false
	}
	c.newSession(resp.Header.Get("Mcp-Session-Id"))
	reply, err := c.awaitReply(resp, id)
	if err != nil {
		c.log.Warn("renewing the upstream session failed", "err", err)
		return false
	}
	c.setVersion(versionOf(reply))
	c.announce()
	c.mu.Lock()
	sess := c.sess
	c.mu.Unlock()
	req = c.newRequest(c.ctx, http.MethodPost, c.base, jsonrpc.Notification(protocol.NotificationInitialized, nil), sess)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := c.do(req, nil); err == nil {
		drain(resp)
	}
	c.startGET()
	return true
}

// awaitReply reads the reply to the Client's own request id from a POST
// response; other messages on its stream are delivered as usual.
func (c *Client) awaitReply(resp *http.Response, id []byte) ([]byte, error) {
	var reply []byte
	match := func(data []byte) bool {
		m, err := jsonrpc.Parse(data)
		if err != nil || m.Kind != jsonrpc.KindResponse || !bytes.Equal(m.Bytes(m.ID), id) {
			return false
		}
		reply = bytes.Clone(data)
		return true
	}
	switch mt := mediaType(resp); {
	case mt == "application/json":
		data, _, over, err := readLimited(resp.Body, c.cfg.MaxMessageBytes)
		if err != nil || over || !match(data) {
			return nil, errors.New("no initialize reply in the body")
		}
	case isEventStream(mt):
		var st streamState
		gen := c.curGen()
		_, _ = c.readEvents(gen, resp.Body, &st, func(ev sse.Event) bool { return reply == nil && match(ev.Data) })
	}
	if reply == nil {
		return nil, errors.New("no initialize reply")
	}
	if m, _ := jsonrpc.Parse(reply); m.IsError {
		return nil, fmt.Errorf("initialize failed: %s", reply)
	}
	return reply, nil
}

// deleteSession ends the session at the server (it may refuse with 405).
func (c *Client) deleteSession(sess session) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ConnectTimeout)
	defer cancel()
	req := c.newRequest(ctx, http.MethodDelete, c.base, nil, sess)
	resp, err := c.hc.Do(req)
	if err != nil {
		c.log.Debug("DELETE of the upstream session failed", "err", err)
		return
	}
	drain(resp)
}
