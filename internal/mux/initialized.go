package mux

import (
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file holds the notifications/initialized of a session-isolated
// (exclusive) process: exactly one per process generation, whoever sends
// it (the client, the gateway before the session's first request, or the
// replay of a restart, init.go), and never overtaken by a request.

// ensureInitialized sends notifications/initialized to an exclusive
// upstream before the first request that follows the client's initialize,
// when the client has not sent it. claude.ai has sent it without
// Mcp-Session-Id (anthropics/claude-ai-mcp#99), which the front accepts
// with 202 but cannot deliver; a server that waits for it (the Python
// SDK's refuse every request until it arrives) would refuse every call.
// Written to the same queue as the request, before it, and only to a
// ready generation: one being initialized by the replay of a restart gets
// the replay's, after its initialize.
func (c *Client) ensureInitialized() {
	m := c.m
	m.mu.Lock()
	gen := m.gen
	send := c.init != nil && c.initGen != gen && m.readyLocked()
	var written chan struct{}
	switch {
	case send:
		c.initGen, written = gen, make(chan struct{})
		c.initWritten = written
	case c.initWritten != nil && c.initGen == gen:
		// Another request of the session (or the client's own
		// notification) is writing it: this one goes after it.
		written = c.initWritten
		c.initHeld++
	}
	m.mu.Unlock()
	if send {
		m.trySendGen(gen, jsonrpc.Notification(protocol.NotificationInitialized, nil), protocol.NotificationInitialized)
		c.initSent(written)
		return
	}
	if written != nil {
		<-written // a non-blocking write away
		m.mu.Lock()
		c.initHeld--
		m.mu.Unlock()
	}
}

// markInitialized claims the current generation for the client's own
// notifications/initialized; nil if that one was sent one already (before
// an earlier request, or by a restart's replay), or is being initialized
// by the replay, which sends its own. Else the caller writes it and then
// calls initSent with the channel returned.
func (c *Client) markInitialized() chan struct{} {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.initGen == m.gen || !m.readyLocked() {
		return nil
	}
	c.initGen, c.initWritten = m.gen, make(chan struct{})
	return c.initWritten
}

// initSent releases the requests waiting for the notifications/initialized
// that written stands for: it has been handed to the upstream.
func (c *Client) initSent(written chan struct{}) {
	c.m.mu.Lock()
	if c.initWritten == written {
		c.initWritten = nil
	}
	c.m.mu.Unlock()
	close(written)
}
