package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file merges the sessions' logging levels into the one level of a
// shared server, and delivers its log messages.

// defaultLevel is the level a shared server is set back to when no session
// asks for one any more (after some session had set one): "info", the
// level most servers start at.
const defaultLevel = 1

// setLevel records the client's level and sends the upstream the most
// verbose level any client asked for, answering the client itself. When
// the server refuses, the client gets the server's own error code and
// message, and its previous level is kept. The whole exchange is bounded
// by the request's context and Options.Timeout, waiting for other
// sessions' level changes included.
func (c *Client) setLevel(ctx context.Context, msg *jsonrpc.Message, out conn.Stream) {
	var p struct {
		Level string `json:"level"`
	}
	id := msg.Bytes(msg.ID)
	if json.Unmarshal(paramsOf(msg.Raw), &p) != nil || !validLevel(p.Level) {
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeInvalidParams, "invalid params: unknown logging level"))
		return
	}
	m := c.m
	req := ctx
	ctx, cancel := context.WithTimeout(ctx, m.opts.Timeout)
	defer cancel()
	// Client.Close ends the wait (for the server, for another session's
	// change, for the server's answer) at once.
	life := c.lifetime()
	defer context.AfterFunc(life, cancel)()
	if err := c.waitReady(ctx); err != nil {
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, err.Error()))
		return
	}
	err := m.lockLevel(ctx)
	if err == nil {
		// Set, applied and (on failure) reverted under levelSem: no other
		// change may send this level between a failure and its revert.
		m.mu.Lock()
		prev := c.level
		m.setClientLevelLocked(c, levelRank(p.Level))
		m.mu.Unlock()
		deadline, _ := ctx.Deadline()
		left := func() bool { return life.Err() != nil || req.Err() != nil }
		res := make(chan error, 1)
		if !m.spawn(func() { res <- m.applyClientLevel(c, prev, deadline, left) }) {
			m.mu.Lock()
			m.setClientLevelLocked(c, prev)
			m.mu.Unlock()
			m.unlockLevel()
			res <- errClosed
		}
		select {
		case err = <-res:
		case <-life.Done():
			err = life.Err()
		case <-req.Done():
			err = req.Err()
		}
	}
	if err != nil {
		var re *rpcError
		if life.Err() != nil {
			out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, c.closedErr().Error()))
			return
		}
		if errors.As(err, &re) {
			out.Reply(jsonrpc.ErrorResponse(id, re.Code, re.Message))
			return
		}
		out.Reply(jsonrpc.ErrorResponse(id, protocol.CodeServerError, clientText("logging/setLevel not applied", err)))
		return
	}
	out.Reply(jsonrpc.Response(id, []byte(`{}`)))
}

// applyClientLevel applies the level client c has just been set to (prev
// before), with levelSem held, and releases it. The change runs to the
// server's answer (or deadline, or the Mux's close) even when its request
// or its session ends first: a setLevel given up unanswered would leave
// the server at a level it reads later, which no live session may want
// and nothing would set back (a session ending in the meantime found the
// level unchanged), while one sent at once could overtake it on a server
// that handles requests concurrently. A change that failed, or whose
// requester left (left, checked once it is answered), is undone, and then
// the level the live sessions want is sent again, after that answer.
func (m *Mux) applyClientLevel(c *Client, prev int, deadline time.Time, left func() bool) error {
	defer m.unlockLevel()
	ctx, cancel := context.WithDeadline(m.ctx, deadline)
	err := m.applyLevelLocked(ctx)
	cancel()
	gone := left()
	if err != nil || gone {
		m.mu.Lock()
		m.setClientLevelLocked(c, prev)
		m.mu.Unlock()
	}
	if err == nil && gone {
		ctx, cancel := context.WithTimeout(m.ctx, m.opts.Timeout)
		defer cancel()
		if err := m.applyLevelLocked(ctx); err != nil {
			m.log.Debug("logging level not set back after its requester left", "err", err)
		}
	}
	return err
}

// lockLevel takes levelSem, waiting at most until ctx ends.
func (m *Mux) lockLevel(ctx context.Context) error {
	select {
	case m.levelSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for another session's logging/setLevel: %w", ctx.Err())
	}
}

func (m *Mux) unlockLevel() { <-m.levelSem }

func validLevel(s string) bool {
	for _, l := range levels {
		if l == s {
			return true
		}
	}
	return false
}

// levelUnknown is Mux.level after a logging/setLevel that got no answer:
// the server may or may not have applied it, so the next change is sent
// whatever it is.
const levelUnknown = -2

// setClientLevelLocked sets the level c asked for (-1: none), counting in
// m.leveled the clients still joined that asked for one. Called with m.mu
// held.
func (m *Mux) setClientLevelLocked(c *Client, level int) {
	if !c.closed {
		switch {
		case c.level < 0 && level >= 0:
			m.leveled++
		case c.level >= 0 && level < 0:
			m.leveled--
		}
	}
	c.level = level
}

// wantLevelLocked is the level the server should be at: the most verbose
// one a session asked for (the least verbose that gives every session what
// it asked); defaultLevel when none asks any more but one was set; -1 when
// none was ever set. Called with m.mu held, on every client's close: the
// clients are walked only when some asked for a level (few do; a stateless
// request, a client of its own, never does), not once per close of
// thousands.
func (m *Mux) wantLevelLocked() int {
	want := -1
	if m.leveled > 0 {
		for c := range m.clients {
			if c.level >= 0 && (want < 0 || c.level < want) {
				want = c.level
			}
		}
	}
	if want < 0 && m.level != -1 {
		want = defaultLevel
	}
	return want
}

// applyLevel sends logging/setLevel upstream when the level the sessions
// want changed (raised or lowered), and waits for the server's answer,
// bounded by ctx and the request timeout. Changes are applied one at a
// time (servers may handle requests concurrently), so the server ends at
// the level the clients want now.
func (m *Mux) applyLevel(ctx context.Context) error {
	if err := m.lockLevel(ctx); err != nil {
		return err
	}
	defer m.unlockLevel()
	return m.applyLevelLocked(ctx)
}

// applyLevelLocked is applyLevel with levelSem held.
func (m *Mux) applyLevelLocked(ctx context.Context) error {
	m.mu.Lock()
	want := m.wantLevelLocked()
	changed := want >= 0 && want != m.level && m.readyLocked()
	gen := m.gen
	m.mu.Unlock()
	if !changed {
		return nil
	}
	_, err := m.roundTripCtx(ctx, gen, protocol.MethodLoggingSetLevel, fmt.Appendf(nil, `{"level":%q}`, levels[want]), m.opts.Timeout)
	var re *rpcError
	m.mu.Lock()
	switch {
	case m.gen != gen:
		// The successor restores the level itself.
	case err == nil:
		m.level = want
	case !errors.As(err, &re):
		m.level = levelUnknown // written, perhaps applied, not answered
	}
	m.mu.Unlock()
	return err
}

// logMessage delivers a log notification to the one session that has a
// request written to the server, if that session asked for logs with
// logging/setLevel and the message's level is at or above the one it asked
// for. Anything else is dropped and counted: over a shared stdio process a
// log message carries no owner, and one session's background work (a log
// written after its reply, while another session's request is in flight)
// may carry that session's data; it is delivered only to a session that
// asked for logs, never broadcast. (Clients that want logs during a call,
// the conformance suite's among them, call logging/setLevel first.)
func (m *Mux) logMessage(msg *jsonrpc.Message) {
	var p struct {
		Level string `json:"level"`
	}
	_ = json.Unmarshal(paramsOf(msg.Raw), &p)
	lvl := levelRank(p.Level)
	m.mu.Lock()
	c, out := m.attributeLocked(0)
	asked := c != nil && c.level >= 0
	wanted := asked && lvl >= c.level
	m.mu.Unlock()
	if !asked {
		m.stats.droppedNotes.Add(1)
		return
	}
	if wanted { // else below the level the session asked for
		out.Send(bytes.Clone(msg.Raw))
	}
}

var levels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// levelRank orders syslog levels; unknown levels rank lowest (most verbose).
func levelRank(s string) int {
	for i, l := range levels {
		if l == s {
			return i
		}
	}
	return 0
}
