package mux

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// How a Client ends: Close and CloseWith (the session ended), Abandon (its
// client left a stream), and what its requests are told when they do.

// errSessionClosed answers the requests of a session that Close ended.
var errSessionClosed = errors.New("mcpgate: session closed")

// closedErrLocked is what a request of c is told once c or the Mux is
// closed: why the session ended if it did, else that the gateway is
// shutting down. Called with m.mu held.
func (c *Client) closedErrLocked() error {
	switch {
	case c.closeErr != nil:
		return c.closeErr
	case c.closed:
		return errSessionClosed
	default:
		return errClosed
	}
}

// closedErr is closedErrLocked taking m.mu.
func (c *Client) closedErr() error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return c.closedErrLocked()
}

// clientText words err for a client, after what failed: one "mcpgate:"
// prefix, and a shutdown said as such.
func clientText(what string, err error) string {
	if errors.Is(err, errClosed) {
		return errClosed.Error()
	}
	return "mcpgate: " + what + ": " + strings.TrimPrefix(err.Error(), "mcpgate: ")
}

// Abandon cancels upstream the client's requests still in flight whose
// replies were to go to out: their client left and cannot resume the stream.
// They end without a reply.
func (c *Client) Abandon(out conn.Stream) {
	m := c.m
	m.mu.Lock()
	var mine []*call
	c.eachLocked(func(cl *call) {
		if cl.replyStream() == out {
			mine = append(mine, cl)
		}
	})
	cancel := m.takeLocked(mine)
	next := m.dequeueLocked()
	m.mu.Unlock()
	for _, cl := range mine {
		endHook(cl.onReply, protocol.CodeServerError, "client disconnected")
	}
	for _, id := range cancel {
		m.cancelUpstream(id, "client disconnected")
	}
	m.write(next)
}

// Close ends the client session: its requests still in flight (written or
// queued) are answered on their Streams with a -32000 "mcpgate: session
// closed" error, then cancelled upstream; its requests still waiting for
// the server to be ready (or for a level change) stop waiting and are
// answered the same way by their own goroutines at once; its subscriptions
// are released and its open server requests refused. It never waits on the
// server: what cannot be written upstream at once is dropped and counted.
// Only the first Close or CloseWith of a Client does anything. Safe for
// concurrent use.
func (c *Client) Close() { c.close(errSessionClosed) }

// CloseWith is Close telling the session's requests why it ended: they are
// answered "mcpgate: " + reason (e.g. reason "the session expired"). An
// empty reason is Close's "session closed".
func (c *Client) CloseWith(reason string) {
	if reason == "" {
		c.close(errSessionClosed)
		return
	}
	c.close(errors.New("mcpgate: " + strings.TrimPrefix(reason, "mcpgate: ")))
}

func (c *Client) close(why error) {
	m := c.m
	m.mu.Lock()
	if c.closed {
		m.mu.Unlock()
		return
	}
	c.closed, c.closeErr = true, why
	if c.stop != nil {
		c.stop() // wakes its requests waiting for the server
	}
	delete(m.clients, c)
	delete(m.writers, c)
	if c.level >= 0 {
		m.leveled--
	}
	m.forgetTasksLocked(c)
	// The server's level follows the sessions still there (also after a
	// timed-out setLevel left it unknown).
	relevel := m.wantLevelLocked() != m.level
	var all []*call
	c.eachLocked(func(cl *call) {
		if m.pending[cl.upID] == cl {
			all = append(all, cl)
		}
	})
	cancel := m.takeLocked(all)
	var refused []*serverReq
	for gid, sr := range m.serverReqs {
		if sr.client == c {
			delete(m.serverReqs, gid)
			if sr.gen == m.gen {
				refused = append(refused, sr)
			}
		}
	}
	var unsub []string
	for uri := range c.subs {
		if m.unsubscribeLocked(c, uri) {
			unsub = append(unsub, uri)
		}
	}
	// Released: the undo hook of a subscribe failed below must not
	// release them again.
	c.subs = nil
	next := m.dequeueLocked()
	m.mu.Unlock()
	// Every request gets exactly one answer: its client hears first, the
	// server is told afterwards.
	for _, cl := range all {
		m.fail(cl, protocol.CodeServerError, why.Error())
	}
	for _, id := range cancel {
		m.cancelUpstream(id, "client session ended")
	}
	for _, sr := range refused {
		m.trySendGen(sr.gen, jsonrpc.ErrorResponse(sr.upID, protocol.CodeInternalError, "mcpgate: client session ended"), "refusal of a server request")
	}
	if m.mode != modeExclusive {
		for _, uri := range unsub {
			m.internal(protocol.MethodResourcesUnsubscribe, uriParams(uri))
		}
		if relevel {
			m.spawn(func() { // the server's answer is not worth holding up a DELETE
				if err := m.applyLevel(m.ctx); err != nil {
					m.log.Debug("logging level not lowered", "err", err)
				}
			})
		}
	}
	m.write(next)
}

// takeLocked removes calls from the pending table and returns the upstream
// ids of those already written, to cancel.
func (m *Mux) takeLocked(calls []*call) []uint64 {
	var sent []uint64
	for _, cl := range calls {
		if m.pending[cl.upID] != cl {
			continue
		}
		delete(m.pending, cl.upID)
		if cl.sent {
			sent = append(sent, cl.upID)
		}
		m.forgetLocked(cl)
	}
	return sent
}

func uriParams(uri string) []byte {
	b, _ := json.Marshal(struct {
		URI string `json:"uri"`
	}{uri})
	return b
}
