package front

import (
	"bytes"
	"errors"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file holds the streams a policy puts between a connection and the
// client: the reply of a list loses the items the principal may not see,
// and a resource update of a URI the principal may not use is dropped
// (from the session's general stream and from a listen's).

// listStream is the stream of one list request (kind set: its reply loses
// the items the principal may not see) or listen (kind ""), whose
// resource updates are filtered.
type listStream struct {
	conn.Stream
	c                *guardedConn
	pol              conn.Policy // the policy in force when the request arrived (its reply's filter)
	p                *auth.Principal
	kind, array, key string
	all              bool // the principal may see every item
}

// Send drops a resource update the policy in force now hides: a listen
// outlives reloads, and one that tightens or adds a policy applies to it
// at once, as to the session's general stream.
func (l *listStream) Send(msg []byte) {
	if !hidesUpdate(l.c.policy(l.c.target), l.p, msg) {
		l.Stream.Send(msg)
	}
}

func (l *listStream) Reply(msg []byte) {
	l.c.mu.Lock()
	if set := l.c.lists[l.Stream]; set != nil {
		delete(set, l)
		if len(set) == 0 {
			delete(l.c.lists, l.Stream)
		}
	}
	l.c.mu.Unlock()
	if msg != nil && l.kind != "" {
		msg = l.filter(msg)
	}
	l.Stream.Reply(msg)
}

// private is the cacheScope of a list under a policy (2026-07-28): never
// shared across users.
var private = jsontext.Value(`"private"`)

// filter returns reply without the items the principal may not see, and
// with its cacheScope, if any, "private". An error reply passes as it is;
// a result that cannot be read strictly (a member named twice, or in
// another case: which one would the client read?) is replaced by an
// error, since what it shows cannot be known.
func (l *listStream) filter(reply []byte) []byte {
	if l.all && !bytes.Contains(reply, []byte(`cacheScope"`)) && bytes.IndexByte(reply, '\\') < 0 {
		return reply // no cacheScope, even escaped
	}
	m, err := jsonrpc.Parse(reply)
	if err != nil || m.IsError {
		return reply
	}
	top, err := conn.StrictMembers(reply, []string{"result"})
	var result map[string]jsontext.Value
	if err == nil {
		result, err = conn.StrictMembers(top["result"], []string{l.array, "cacheScope"})
	}
	if err != nil {
		return jsonrpc.ErrorResponse(m.Bytes(m.ID), protocol.CodeInternalError,
			"mcpgate: the server's "+l.array+" list cannot be filtered by the policy: its result "+strings.TrimPrefix(err.Error(), "is "))
	}
	changed := false
	if scope, ok := result["cacheScope"]; ok && !bytes.Equal(scope, private) {
		result["cacheScope"], changed = private, true
	}
	var items []jsontext.Value
	if !l.all && jsonv2.Unmarshal(result[l.array], &items) == nil {
		kept := items[:0:0]
		for _, it := range items {
			var name string
			item, err := conn.StrictMembers(it, []string{l.key})
			if err != nil || jsonv2.Unmarshal(item[l.key], &name) != nil {
				continue // not an item, or an ambiguous one: nobody may see it
			}
			if l.pol.Allows(l.p, l.kind, name, nil) {
				kept = append(kept, it)
			}
		}
		if len(kept) != len(items) {
			result[l.array], _ = jsonv2.Marshal(kept)
			changed = true
		}
	}
	if !changed {
		return reply
	}
	raw, err := jsonv2.Marshal(result)
	if err != nil {
		return reply
	}
	return jsonrpc.Response(m.Bytes(m.ID), raw)
}

// track registers l as answering on l.Stream, for Abandon, and returns it.
func (c *guardedConn) track(l *listStream) *listStream {
	c.mu.Lock()
	if c.lists == nil {
		c.lists = map[conn.Stream]map[*listStream]struct{}{}
	}
	if c.lists[l.Stream] == nil {
		c.lists[l.Stream] = map[*listStream]struct{}{}
	}
	c.lists[l.Stream][l] = struct{}{}
	c.mu.Unlock()
	return l
}

// updateStream is a session's general stream under a policy: the
// resource updates the principal may not see are dropped.
type updateStream struct {
	conn.Stream
	tp *targetPolicy // looked up per update
	p  *auth.Principal
}

func (u *updateStream) Send(msg []byte) {
	if !hidesUpdate(u.tp.policy(u.tp.target), u.p, msg) {
		u.Stream.Send(msg)
	}
}

// updates wraps the general stream of a session of principal p.
func (tp *targetPolicy) updates(p *auth.Principal, general conn.Stream) conn.Stream {
	if general == nil {
		return nil
	}
	return &updateStream{Stream: general, tp: tp, p: p}
}

// hidesUpdate reports whether msg is a notifications/resources/updated of
// a URI p may not use (or whose URI is ambiguous).
func hidesUpdate(pol conn.Policy, p *auth.Principal, msg []byte) bool {
	if pol == nil || !bytes.Contains(msg, []byte("updated")) && bytes.IndexByte(msg, '\\') < 0 {
		return false
	}
	m, err := jsonrpc.Parse(msg)
	if err != nil || m.Kind != jsonrpc.KindNotification || !m.MethodIs(protocol.NotificationResourcesUpdated) {
		return false
	}
	cp, err := conn.ReadParams(&m)
	return err != nil || !pol.Allows(p, policyResource, cp.URI, nil)
}

// checkListen refuses a subscriptions/listen subscribing to a resource p
// may not use.
func (c *guardedConn) checkListen(pol conn.Policy, p *auth.Principal, msg *jsonrpc.Message) error {
	top, err := conn.StrictMembers(msg.Raw, conn.WatchedTop)
	if err != nil {
		return errors.New("mcpgate: the request " + err.Error())
	}
	raw, ok := top["params"]
	if !ok {
		return nil
	}
	params, err := conn.StrictMembers(raw, []string{"notifications"})
	if err != nil {
		return errors.New("mcpgate: params " + err.Error())
	}
	raw, ok = params["notifications"]
	if !ok {
		return nil
	}
	notes, err := conn.StrictMembers(raw, []string{"resourceSubscriptions"})
	if err != nil {
		return errors.New("mcpgate: params.notifications " + err.Error())
	}
	var uris []string
	if v, ok := notes["resourceSubscriptions"]; ok && jsonv2.Unmarshal(v, &uris) != nil {
		return errors.New("mcpgate: params.notifications.resourceSubscriptions must be an array of strings")
	}
	for _, uri := range uris {
		if !pol.Allows(p, policyResource, uri, nil) {
			return errors.New(c.denial(p, policyResource, uri))
		}
	}
	return nil
}
