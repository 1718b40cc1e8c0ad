package remote

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"
)

// This file is the standalone GET stream of a Streamable HTTP session: the
// server's messages not tied to a request. A server allows one such stream
// per session (a second GET is answered 409), so when several Clients
// share one upstream session (replicas of the gateway serving one client
// session), only the one carrying the client's own standalone stream may
// hold it. A Client that initialized its session holds the stream from
// notifications/initialized on, as a lone client does; a Client that
// resumed a session (Config.Resume) holds it only while told to
// (HoldStream), so that the replicas that resumed the session to serve a
// few requests do not all contend for it.

// Delays between GETs the server refused with 409 because another client
// holds the session's stream. That client is another replica's: its
// client's stream moved here, and the server lets go of the old upstream
// stream when it sees that connection close (at once for a replica that
// ended or was killed; its TCP connection is closed by the kernel). The
// retries go on while this Client is to hold the stream, never slower than
// maxConflictDelay, so the stream opens here within that of the server
// letting go.
const (
	minConflictDelay = 100 * time.Millisecond
	maxConflictDelay = time.Second
)

// conflictDelay returns the delay before the n-th consecutive retry (n
// from 0) of a GET refused with 409: a random value in [d/2, d] with
// d = min(minConflictDelay*2^n, maxConflictDelay).
func conflictDelay(n int) time.Duration {
	d := maxConflictDelay
	if n < 10 {
		d = min(minConflictDelay<<n, maxConflictDelay)
	}
	return d/2 + rand.N(d/2+1)
}

// HoldStream tells a Client that resumed its session (Config.Resume)
// whether it carries the session's server-to-client messages now: true
// when the client's standalone stream is served through it, false when
// that stream goes and another Client may take the upstream stream. Held,
// the Client opens the session's standalone GET stream (and keeps it
// across a renewal or Adopt); let go, it closes it. A Client that
// initialized its session holds the stream for its whole life and ignores
// HoldStream. Never blocks on the network.
func (c *Client) HoldStream(held bool) {
	c.mu.Lock()
	if !c.onDemand || c.held == held {
		c.mu.Unlock()
		return
	}
	c.held = held
	if !held && c.sess.stopGET != nil {
		c.sess.stopGET()
		c.sess.stopGET = nil
	}
	c.mu.Unlock()
	if held {
		c.startGET()
	}
}

// startGET opens the standalone stream of the current session unless it is
// open already, or is not this Client's to hold (HoldStream).
func (c *Client) startGET() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.sess.stopGET != nil || c.onDemand && !c.held {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.sess.stopGET = cancel
	sess := c.sess
	c.wg.Add(1)
	go c.standalone(ctx, sess)
}

// standalone reads the session's GET stream (messages not tied to a
// request) until the session ends, the stream is let go (HoldStream) or
// Close, reconnecting with Last-Event-ID after a drop. A server without
// one (405) is fine.
func (c *Client) standalone(ctx context.Context, sess session) {
	defer c.wg.Done()
	var st streamState
	for failures, conflicts := 0, 0; ; {
		resp, err := c.get(ctx, sess, st.lastID)
		if ctxDone(ctx) {
			if err == nil {
				resp.Body.Close()
			}
			return
		}
		delay := time.Duration(-1)
		switch {
		case err != nil:
			c.log.Debug("standalone stream: connect failed", "err", err)
			failures++
		case resp.StatusCode == http.StatusMethodNotAllowed:
			drain(resp)
			c.log.Debug("server offers no standalone stream")
			return
		case resp.StatusCode == http.StatusNotFound:
			drain(resp) // the session is gone; the next POST renews it
			return
		case resp.StatusCode == http.StatusConflict:
			// Another client holds the session's one stream: the
			// replica the client's stream was served by before, until
			// the server sees it go.
			drain(resp)
			c.log.Debug("standalone stream held by another client; retrying")
			delay = conflictDelay(conflicts)
			conflicts++
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			drain(resp)
			c.log.Warn("standalone stream refused", "status", resp.StatusCode)
			return
		case resp.StatusCode != http.StatusOK || !isEventStream(mediaType(resp)):
			drain(resp)
			failures++
		default:
			failures, conflicts = 0, 0
			_, err := c.readEvents(c.curGen(), resp.Body, &st, nil)
			resp.Body.Close()
			if st.oversized {
				// Reconnecting may replay the same event: back off.
				st.oversized = false
				failures = maxResumes
			}
			if !ctxDone(ctx) {
				c.log.Debug("standalone stream ended; reconnecting", "err", err)
			}
		}
		if delay < 0 {
			delay = retryDelay(st.retry, failures)
		}
		if !sleep(ctx, delay) {
			return
		}
	}
}
