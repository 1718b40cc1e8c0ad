package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// This file is the legacy HTTP+SSE transport (MCP 2024-11-05,
// basic/transports "HTTP with SSE"): a GET opens the event stream, whose
// first event, "endpoint", names the URL to POST messages to; the server's
// messages arrive as "message" events. The stream is the session: when it
// drops, the generation ends, and a new stream starts the next one.

// legacyConn is one legacy event stream, that is one upstream session.
type legacyConn struct {
	gen   uint64
	ready chan struct{} // closed once endpoint is set
	gone  chan struct{} // closed when the stream has ended
	// endpoint is written by the reader before ready is closed and only
	// read after that.
	endpoint *url.URL
}

func newLegacyConn(gen uint64) *legacyConn {
	return &legacyConn{gen: gen, ready: make(chan struct{}), gone: make(chan struct{})}
}

// errNoEndpoint ends a stream that sent no endpoint event in time.
var errNoEndpoint = errors.New("no endpoint event within the request timeout")

// legacy returns the current legacy connection, starting the reader on
// first use: the stream is opened lazily, by the first message to send.
func (c *Client) legacy() *legacyConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lc == nil {
		c.lc = newLegacyConn(c.gen)
		c.wg.Add(1)
		go c.legacyLoop(c.lc)
	}
	return c.lc
}

// postLegacy POSTs one message to the endpoint of its generation's stream,
// waiting for the endpoint event if need be. Replies come on the stream.
func (c *Client) postLegacy(o *outgoing) {
	lc := c.legacy()
	if lc.gen != o.gen {
		return // its generation is gone; the owner was told by Exited
	}
	select {
	case <-lc.ready:
	case <-lc.gone:
		return
	case <-o.ctx.Done():
		return
	}
	var onWritten func()
	if o.kind == jsonrpc.KindRequest {
		onWritten = o.release
	}
	req := c.newRequest(o.ctx, http.MethodPost, lc.endpoint, o.body, session{})
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.do(req, onWritten)
	o.release()
	if err != nil {
		if !ctxDone(c.ctx) {
			c.fail(o.gen, o.id, protocol.CodeServerError, requestFailed(err))
		}
		return
	}
	drain(resp)
	if code := resp.StatusCode; code < 200 || code > 299 {
		if o.id == nil {
			c.log.Warn("upstream refused a message", "method", o.method, "status", code)
		}
		c.fail(o.gen, o.id, protocol.CodeServerError, fmt.Sprintf("mcpgate: upstream answered HTTP %d %s", code, http.StatusText(code)))
	}
}

// legacyLoop owns the event stream: it reads one connection after another
// until Close. Each lost stream ends its generation (Handler.Exited); the
// next one starts when its endpoint arrives (Handler.Started).
func (c *Client) legacyLoop(lc *legacyConn) {
	defer c.wg.Done()
	for failures := 0; ; {
		hint, err := c.legacyStream(lc)
		close(lc.gone)
		if ctxDone(c.ctx) {
			return
		}
		c.mu.Lock()
		gen, started := c.gen, c.started
		c.started = false
		c.inflight = map[string]context.CancelFunc{} // the owner fails them on Exited
		c.mu.Unlock()
		if started {
			c.log.Warn("legacy SSE stream lost; reconnecting", "gen", gen, "err", err)
			c.deliverMu.Lock()
			c.h.Exited(gen, fmt.Errorf("%w: %v", ErrDisconnected, err))
			c.deliverMu.Unlock()
		} else {
			c.log.Debug("legacy SSE stream: connect failed", "err", err)
		}
		if lc.endpoint != nil {
			failures = 0
		} else {
			failures++
		}
		if !sleep(c.ctx, retryDelay(hint, failures)) {
			return
		}
		lc = newLegacyConn(gen + 1)
		c.mu.Lock()
		c.lc = lc
		c.mu.Unlock()
	}
}

// legacyStream opens and reads one event stream, returning why it ended and
// the server's retry hint.
func (c *Client) legacyStream(lc *legacyConn) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(c.ctx)
	defer cancel(nil)
	req := c.newRequest(ctx, http.MethodGet, c.base, nil, session{})
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.do(req, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !isEventStream(mediaType(resp)) {
		drain(resp)
		return 0, fmt.Errorf("GET %s answered HTTP %d (%s)", redact(c.base), resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	waiting := time.AfterFunc(c.cfg.RequestTimeout, func() {
		select {
		case <-lc.ready:
		default:
			cancel(errNoEndpoint)
		}
	})
	defer waiting.Stop()
	var st streamState
	_, err = c.readEvents(lc.gen, resp.Body, &st, func(ev sse.Event) bool {
		if ev.Event == "endpoint" {
			if lc.endpoint != nil {
				c.log.Warn("legacy SSE stream sent a second endpoint event; ignored")
			} else if err := c.setEndpoint(lc, ev.Data); err != nil {
				cancel(err)
			}
			return true
		}
		return lc.endpoint == nil // nothing may precede the endpoint
	})
	if cause := context.Cause(ctx); cause != nil && !ctxDone(c.ctx) {
		err = cause
	}
	return st.retry, err
}

// setEndpoint resolves the endpoint event's URL against Config.URL, checks
// that it is on the same origin (the messages, and Config.Headers, must not
// go elsewhere), and starts the connection's generation.
func (c *Client) setEndpoint(lc *legacyConn, data []byte) error {
	ep, err := resolveEndpoint(c.base, string(data))
	if err != nil {
		return err
	}
	c.mu.Lock()
	lc.endpoint = ep
	start := !c.started
	if start {
		c.gen, c.started = lc.gen, true
	}
	close(lc.ready)
	c.mu.Unlock()
	c.log.Debug("legacy SSE endpoint", "gen", lc.gen, "endpoint", redact(ep))
	if start {
		c.deliverMu.Lock()
		c.h.Started(lc.gen)
		c.deliverMu.Unlock()
	}
	return nil
}

// resolveEndpoint resolves an endpoint event's data against base and
// requires the result to be an http(s) URL of the same origin.
func resolveEndpoint(base *url.URL, data string) (*url.URL, error) {
	ref := strings.TrimSpace(data)
	if ref == "" {
		return nil, errors.New("empty endpoint event")
	}
	ep, err := base.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("endpoint event: %w", err)
	}
	if !sameOrigin(ep, base) {
		return nil, fmt.Errorf("endpoint %s is not on the origin of %s", redact(ep), redact(base))
	}
	ep.Fragment, ep.RawFragment = "", ""
	return ep, nil
}
