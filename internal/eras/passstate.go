package eras

import (
	"bytes"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file binds the requestState of a server that speaks the stateless
// revision itself (a passthrough connection) to the principal and target
// it was given for, when requests are authenticated. Such a server's
// state is its own, opaque to the gateway, and proves nothing of who
// retries: another principal holding it could otherwise resume, on the
// shared server, a request that was not theirs. So the state a client gets
// is the server's sealed by the key ring (Parking.Ring) for a purpose that
// names the target and principal; a retry's state must open for the
// retry's own, and the server gets its state back as it wrote it.

// passStatePurpose is what a passthrough state is sealed for: the
// target's key (which has no NUL) and the principal's.
func passStatePurpose(target, owner string) string {
	return "mcpgate/front/passthrough-requestState\x00" + target + "\x00" + owner
}

// passStateTTL bounds a passthrough state's life. The server's own state
// has whatever life the server gives it; the seal's bound only keeps a
// leaked state from being good forever, so it is far beyond a client's
// round (InputWait bounds a parked one at minutes).
const passStateTTL = 24 * time.Hour

// sealPassState seals a server's requestState for target and owner.
func (p *Parking[S]) sealPassState(inner, target, owner string) string {
	return p.Ring.Seal(passStatePurpose(target, owner), []byte(inner), passStateTTL)
}

// openPassState returns the server's requestState sealed in state, if it
// was sealed for target and owner (expired, sealed by a retired key, or
// forged: not).
func (p *Parking[S]) openPassState(state, target, owner string) (string, bool) {
	plain, err := p.Ring.Open(passStatePurpose(target, owner), state)
	if err != nil {
		return "", false
	}
	return string(plain), true
}

// mentions reports whether raw may hold a member named key (lower case)
// in any case or escaped: it holds a backslash, or key case-insensitively.
func mentions(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') >= 0 {
		return true
	}
	for i := 0; i+len(key) <= len(raw); i++ {
		if raw[i]|0x20 == key[0] && bytes.EqualFold(raw[i:i+len(key)], []byte(key)) {
			return true
		}
	}
	return false
}

// unsealRetry returns msg with its params.requestState, sealed by
// sealPassState, replaced by the server's own; msg itself when it has
// none; ok false when its state does not open for target and owner, or
// is ambiguous (a member named twice, or "RequestState": a server might
// read that one).
func (p *Parking[S]) unsealRetry(msg *jsonrpc.Message, target, owner string) (*jsonrpc.Message, bool) {
	if !mentions(msg.Raw, "requeststate") {
		return msg, true
	}
	top, err := conn.StrictMembers(msg.Raw, conn.WatchedTop)
	if err != nil {
		return nil, false
	}
	rawParams, ok := top["params"]
	if !ok {
		return msg, true
	}
	params, err := conn.StrictMembers(rawParams, conn.WatchedParams)
	if err != nil {
		return nil, false
	}
	rs, ok := params["requestState"]
	if !ok {
		return msg, true
	}
	var state string
	if jsonv2.Unmarshal(rs, &state) != nil {
		return nil, false
	}
	inner, ok := p.openPassState(state, target, owner)
	if !ok {
		return nil, false
	}
	params["requestState"], _ = jsonv2.Marshal(inner)
	top["params"], _ = jsonv2.Marshal(params)
	raw, err := jsonv2.Marshal(top)
	if err != nil {
		return nil, false
	}
	m, err := jsonrpc.Parse(raw)
	if err != nil {
		return nil, false
	}
	return &m, true
}

// sealReply returns a passthrough reply with its result.requestState, if
// it has one, sealed for target and owner; an error in its place when the
// state is ambiguous (named twice, or in another case) or not a string:
// it must not reach the client as the server wrote it.
func (p *Parking[S]) sealReply(reply []byte, target, owner string) []byte {
	if !mentions(reply, "requeststate") {
		return reply
	}
	m, err := jsonrpc.Parse(reply)
	if err != nil || m.IsError {
		return reply
	}
	bad := func() []byte {
		return jsonrpc.ErrorResponse(m.Bytes(m.ID), protocol.CodeInternalError, "mcpgate: the server's requestState is ambiguous or not a string")
	}
	top, err := conn.StrictMembers(reply, []string{"result"})
	if err != nil {
		return bad()
	}
	result, err := conn.StrictMembers(top["result"], []string{"requestState"})
	if err != nil {
		return bad()
	}
	rs, ok := result["requestState"]
	if !ok {
		return reply
	}
	var state string
	if jsonv2.Unmarshal(rs, &state) != nil {
		return bad()
	}
	result["requestState"], _ = jsonv2.Marshal(p.sealPassState(state, target, owner))
	raw, err := jsonv2.Marshal(result)
	if err != nil {
		return bad()
	}
	return jsonrpc.Response(m.Bytes(m.ID), raw)
}
