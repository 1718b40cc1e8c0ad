package bridge

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// This file serves the stdio clients of the stateless revision
// (2026-07-28): they send no initialize, and every request carries
// params._meta[protocol.MetaProtocolVersion] (eras.IsModern decides, as it
// does for the gateway's own HTTP front). Such requests bypass the
// remote.Client and its session: the first one makes the bridge probe the
// remote once with server/discover (remote.Stateless.Discover) and keep the
// verdict for the life of Run, as the revision asks of a client
// (basic/versioning, "cache the era"). If the remote speaks 2026-07-28,
// each request goes out as its own POST (remote.Stateless.Do) on a
// goroutine of its own, so that requests interleave; its notifications and
// its reply go to Stdout. If it does not, each request is answered with
// -32022 naming the session-era versions, which makes a dual-era client
// fall back to initialize: that goes down the session path, unchanged.
//
// A notifications/cancelled naming a request in flight here cancels its
// Do, which closes the POST or its stream (the revision's cancellation on
// HTTP); the request is then no longer answered, as on the session path. A
// subscriptions/listen is such a request, only longer; the drain at stdin
// EOF does not wait for it (it ends only when cancelled), but it too gets
// an error reply when Run cuts it.

// MaxStatelessInFlight bounds the stateless requests in flight at once
// (one goroutine and one POST each). A request past it is answered at once
// with an error (-32000) and counted: blocking the reader instead would
// also hold back the notifications/cancelled that could free a slot.
const MaxStatelessInFlight = 256

// era is the bridge's verdict about the remote's revision.
type era uint8

const (
	eraUnknown era = iota // not probed yet, or the probe said nothing
	eraModern             // it listed 2026-07-28 in server/discover
	eraSession            // it answered, but not as a 2026-07-28 server
)

// probe is one server/discover in progress; requests that arrive during it
// wait for its outcome rather than probe again.
type probe struct {
	done chan struct{} // closed when era and err are set
	era  era
	err  error // why it said nothing (unreachable, 5xx...), if it did not
	// cancelled: the request that probed was cancelled, which says
	// nothing about the remote either, nor about the waiters' requests.
	cancelled bool
}

// call is one stateless request in flight.
type call struct {
	cancel context.CancelFunc // ends its probe wait or Do
	listen bool               // a subscriptions/listen: drain does not wait for it
}

// statelessRequest takes msg (line parsed) if it belongs to the stateless
// path: a request of the 2026-07-28 revision, or the cancellation of one in
// flight. It reports whether it did; anything else is the session path's.
func (b *bridge) statelessRequest(msg *jsonrpc.Message, line []byte) bool {
	switch {
	case msg.Kind == jsonrpc.KindNotification && msg.MethodIs(protocol.NotificationCancelled):
		rid := msg.Bytes(msg.CancelRequestID)
		if rid == nil {
			return false
		}
		b.mu.Lock()
		c, ok := b.calls[string(rid)]
		if ok {
			b.removeCallLocked(string(rid))
		}
		b.mu.Unlock()
		if ok {
			c.cancel()
		}
		return ok
	case msg.Kind != jsonrpc.KindRequest || !eras.IsModern("", msg):
		return false
	}
	id := msg.Bytes(msg.ID)
	b.mu.Lock()
	_, dup := b.calls[string(id)]
	full := len(b.calls) >= MaxStatelessInFlight
	var c *call
	var ctx context.Context
	if !dup && !full {
		c = &call{listen: msg.MethodIs(protocol.MethodSubscriptionsListen)}
		ctx, c.cancel = context.WithCancel(b.slCtx)
		b.calls[string(id)] = c
		if !c.listen {
			b.drainCalls++
		}
		b.slWG.Add(1)
	}
	b.mu.Unlock()
	switch {
	case dup:
		b.write(jsonrpc.ErrorResponse(id, protocol.CodeInvalidRequest, "mcpgate: a request with this id is already in flight"))
	case full:
		b.slRefused.Add(1)
		b.log.Warn("too many stateless requests in flight; refused", "method", msg.MethodName(), "limit", MaxStatelessInFlight)
		b.write(jsonrpc.ErrorResponse(id, protocol.CodeServerError, "mcpgate: too many requests in flight"))
	default:
		go b.doStateless(ctx, c, id, line)
	}
	return true
}

// doStateless answers the stateless request line (id id), registered as c,
// on the goroutine it runs on.
func (b *bridge) doStateless(ctx context.Context, c *call, id, line []byte) {
	defer b.slWG.Done()
	defer c.cancel()
	defer b.finishCall(id, c, func() []byte { // Do always replies unless cancelled: never reached otherwise
		return jsonrpc.ErrorResponse(id, protocol.CodeServerError, "mcpgate: the remote server sent no reply")
	})
	switch e, err := b.remoteEra(ctx); {
	case ctx.Err() != nil:
		// Cancelled by the client, or cut by Run (which answers it).
	case err != nil:
		b.finishCall(id, c, func() []byte { return jsonrpc.ErrorResponse(id, protocol.CodeServerError, "mcpgate: "+err.Error()) })
	case e == eraSession:
		b.finishCall(id, c, func() []byte { return unsupportedVersion(id, line) })
	default:
		b.sl.Do(ctx, line, nil,
			func(n []byte) {
				b.mu.Lock()
				live := b.calls[string(id)] == c
				b.mu.Unlock()
				if live {
					b.write(n)
				}
			},
			func(r []byte) { b.finishCall(id, c, func() []byte { return r }) })
	}
}

// finishCall writes the reply reply() to the request id if c is still in
// flight under it (not cancelled, answered, or cut by Run), and retires c.
func (b *bridge) finishCall(id []byte, c *call, reply func() []byte) {
	b.mu.Lock()
	live := b.calls[string(id)] == c
	if live {
		b.removeCallLocked(string(id))
	}
	b.mu.Unlock()
	if live {
		b.write(reply())
	}
}

// removeCallLocked forgets the call in flight under id.
func (b *bridge) removeCallLocked(id string) {
	if c := b.calls[id]; c != nil && !c.listen {
		b.drainCalls--
	}
	delete(b.calls, id)
	b.settleLocked()
}

// remoteEra returns the verdict about the remote, probing it if none was
// reached yet (one probe at a time; a probe that said nothing, the remote
// being unreachable say, is tried again by the next request).
func (b *bridge) remoteEra(ctx context.Context) (era, error) {
	if b.sl == nil {
		return eraSession, nil // the legacy SSE transport was asked for
	}
	for {
		b.mu.Lock()
		if b.era != eraUnknown {
			e := b.era
			b.mu.Unlock()
			return e, nil
		}
		if p := b.probe; p != nil {
			b.mu.Unlock()
			select {
			case <-p.done:
				if p.cancelled {
					continue // probe again, for this request
				}
				if p.err != nil {
					return eraUnknown, p.err
				}
				return p.era, nil
			case <-ctx.Done():
				return eraUnknown, ctx.Err()
			}
		}
		p := &probe{done: make(chan struct{})}
		b.probe = p
		b.mu.Unlock()

		_, err := b.sl.Discover(ctx)
		switch {
		case err == nil:
			p.era = eraModern
			b.log.Info("the remote server speaks " + protocol.StatelessVersion + "; its stateless clients are served directly")
		case errors.Is(err, remote.ErrNotModern):
			p.era = eraSession
			b.log.Info("the remote server does not speak "+protocol.StatelessVersion+"; its stateless clients are told to initialize", "reason", err)
		case ctx.Err() != nil:
			p.err, p.cancelled = ctx.Err(), true
		default:
			p.err = err
			b.log.Warn("probing the remote server failed", "err", err)
		}
		b.mu.Lock()
		b.era, b.probe = p.era, nil
		b.mu.Unlock()
		close(p.done)
		if p.err != nil {
			return eraUnknown, p.err
		}
		return p.era, nil
	}
}

// unsupportedVersion is the reply to the request line (id id) in front of a
// session-era remote: -32022, the revision's error for a version the server
// does not speak, with the versions it does and the one requested (echoed
// as the client wrote it), so that a dual-era client falls back to
// initialize (basic/versioning, era probe).
func unsupportedVersion(id, line []byte) []byte {
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	_ = json.Unmarshal(line, &m) // eras.IsModern found the key
	requested := m.Params.Meta[protocol.MetaProtocolVersion]
	if requested == nil {
		requested = json.RawMessage(`"` + protocol.StatelessVersion + `"`)
	}
	out, err := json.Marshal(errorReply{JSONRPC: "2.0", ID: id, Error: errorObject{
		Code:    protocol.CodeUnsupportedVersion,
		Message: "Unsupported protocol version: the remote server speaks only session-era versions; send initialize",
		// The versions a session-era remote may speak, newest first, for
		// the client to fall back to initialize with.
		Data: versionData{Supported: protocol.SessionVersions, Requested: requested},
	}})
	if err != nil { // unreachable: id and requested are valid JSON
		return jsonrpc.ErrorResponse(id, protocol.CodeUnsupportedVersion, "Unsupported protocol version")
	}
	return out
}

// errorReply is a JSON-RPC error response with data, which
// jsonrpc.ErrorResponse does not carry.
type errorReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   errorObject     `json:"error"`
}

type errorObject struct {
	Code    int         `json:"code"`
	Message string      `json:"message"`
	Data    versionData `json:"data"`
}

// versionData is the data of -32022 (schema.ts
// UnsupportedProtocolVersionError).
type versionData struct {
	Supported []string        `json:"supported"`
	Requested json.RawMessage `json:"requested"`
}

// failCalls answers every stateless request in flight with an error saying
// why, and cancels it.
func (b *bridge) failCalls(why string) {
	b.mu.Lock()
	type cut struct {
		id []byte
		c  *call
	}
	cuts := make([]cut, 0, len(b.calls))
	for id, c := range b.calls {
		cuts = append(cuts, cut{[]byte(id), c})
	}
	clear(b.calls)
	b.drainCalls = 0
	b.settleLocked()
	b.mu.Unlock()
	for _, x := range cuts {
		x.c.cancel()
		b.write(jsonrpc.ErrorResponse(x.id, protocol.CodeServerError, why))
	}
}

// stopStateless ends every stateless goroutine and waits for them.
func (b *bridge) stopStateless() {
	b.slStop()
	b.slWG.Wait()
	if b.sl != nil {
		b.sl.Close()
	}
	if n := b.slRefused.Load(); n > 0 {
		b.log.Warn("stateless requests were refused for want of a slot", "count", n, "limit", MaxStatelessInFlight)
	}
}
