package mux

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is one client's subscriptions/listen as modern_listen.go
// serves it: what it asks for (a filter), its acknowledgement, and the
// Stream in front of the client's that keeps the acknowledgement first and
// nothing after the end.

// filter is a SubscriptionFilter: the params.notifications of
// subscriptions/listen and of its acknowledgement. Omitted means not
// subscribed.
type filter struct {
	Tools     bool     `json:"toolsListChanged,omitempty"`
	Prompts   bool     `json:"promptsListChanged,omitempty"`
	Resources bool     `json:"resourcesListChanged,omitempty"`
	URIs      []string `json:"resourceSubscriptions,omitempty"`
}

// covers reports whether f asks for everything g asks for.
func (f filter) covers(g filter) bool {
	if g.Tools && !f.Tools || g.Prompts && !f.Prompts || g.Resources && !f.Resources {
		return false
	}
	for _, uri := range g.URIs {
		if !slices.Contains(f.URIs, uri) {
			return false
		}
	}
	return true
}

// intersect returns what f asks for that agreed has.
func (f filter) intersect(agreed filter) filter {
	out := filter{Tools: f.Tools && agreed.Tools, Prompts: f.Prompts && agreed.Prompts, Resources: f.Resources && agreed.Resources}
	for _, uri := range f.URIs {
		if slices.Contains(agreed.URIs, uri) {
			out.URIs = append(out.URIs, uri)
		}
	}
	return out
}

// wants reports whether notification method (resources/updated: for uri)
// goes to a listen with filter f. An update may name a sub-resource of a
// URI subscribed to.
func (f filter) wants(method, uri string) bool {
	switch method {
	case protocol.NotificationToolsListChanged:
		return f.Tools
	case protocol.NotificationPromptsListChanged:
		return f.Prompts
	case protocol.NotificationResourcesListChanged:
		return f.Resources
	case protocol.NotificationResourcesUpdated:
		return slices.ContainsFunc(f.URIs, func(s string) bool {
			return uri == s || strings.HasPrefix(uri, strings.TrimSuffix(s, "/")+"/")
		})
	}
	return false
}

// requestedFilter returns a listen request's params.notifications; false
// when it is missing or not a filter.
func requestedFilter(raw []byte) (filter, bool) {
	var p struct {
		Notifications *filter `json:"notifications"`
	}
	if json.Unmarshal(paramsOf(raw), &p) != nil || p.Notifications == nil {
		return filter{}, false
	}
	return *p.Notifications, true
}

// ackMessage is the acknowledgement of a client listen with raw id.
func ackMessage(id []byte, agreed filter) []byte {
	f, _ := json.Marshal(agreed)
	msg := append([]byte(`{"jsonrpc":"2.0","method":"`+protocol.NotificationSubscriptionsAcknowledged+`","params":{"_meta":{"`+protocol.MetaSubscriptionID+`":`), id...)
	msg = append(append(append(msg, `},"notifications":`...), f...), "}}"...)
	return msg
}

// listener is one client's listen: its call's Stream, which keeps the
// acknowledgement first and nothing after the end.
type listener struct {
	call *call       // its call in the pending table
	out  conn.Stream // the client's stream
	id   []byte      // the client's raw id (its call's)
	want filter      // what it asked for; static

	// guarded by Mux.mu:
	up     *upListen // the gateway listen serving it; nil while none is open
	ack    []byte    // its acknowledgement, once the agreement is known
	agreed filter    // what it was acknowledged: what it gets

	mu      sync.Mutex // orders what reaches out; held only around its non-blocking methods
	acked   bool       // guarded by mu: the acknowledgement was sent
	ended   bool       // guarded by mu: nothing more is sent
	replied bool       // guarded by mu: Reply was called
}

// Send is a notification for the listen: dropped before the
// acknowledgement and after the end.
func (l *listener) Send(msg []byte) { l.deliver(nil, msg) }

// Reply ends the listen with msg (nil: without a reply).
func (l *listener) Reply(msg []byte) { l.end(nil, nil, msg) }

// deliver sends ack first unless it was sent (nil: not known yet, so msg
// is dropped), then msg when not nil.
func (l *listener) deliver(ack, msg []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if !l.acked {
		if ack == nil {
			return
		}
		l.out.Send(ack)
		l.acked = true
	}
	if msg != nil {
		l.out.Send(msg)
	}
}

// end sends last (after ack, when that is known and was not sent), then
// the reply, once.
func (l *listener) end(ack, last, reply []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended && last != nil {
		if !l.acked && ack != nil {
			l.out.Send(ack)
		}
		l.out.Send(last)
	}
	l.ended = true
	if !l.replied {
		l.replied = true
		l.out.Reply(reply)
	}
}

// stop ends the listen without a reply: its client left.
func (l *listener) stop() {
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
}

// replyStream returns the Stream the client gave for c: a listen's call
// has its listener in between.
func (c *call) replyStream() conn.Stream {
	if l, ok := c.out.(*listener); ok {
		return l.out
	}
	return c.out
}
