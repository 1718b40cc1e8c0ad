package eras

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is subscriptions/listen as the gateway serves it on every
// path: what a listen asks for (a Filter), what a server can agree to, its
// acknowledgement, the tag of its notifications, its end, and the Stream
// in front of the client's that keeps the acknowledgement first and
// nothing after the end. Three paths use it:
//
//   - the front, for a stateless client on a server of the session eras
//     (listen_translated.go: the gateway acknowledges and subscribes itself);
//   - the reverse bridge, for a session-era client on a 2026-07-28 server
//     (reverse_listen.go: the gateway holds one listen for the session);
//   - the multiplexer's stateless process (mux modern_listen.go: many
//     client listens served from one listen of the gateway's own).

// Filter is a SubscriptionFilter: the params.notifications of
// subscriptions/listen and of its acknowledgement. Omitted means not
// subscribed.
type Filter struct {
	Tools     bool     `json:"toolsListChanged,omitempty"`
	Prompts   bool     `json:"promptsListChanged,omitempty"`
	Resources bool     `json:"resourcesListChanged,omitempty"`
	URIs      []string `json:"resourceSubscriptions,omitempty"`
}

// Covers reports whether f asks for everything g asks for.
func (f Filter) Covers(g Filter) bool {
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

// Intersect returns what f asks for that agreed has.
func (f Filter) Intersect(agreed Filter) Filter {
	out := Filter{Tools: f.Tools && agreed.Tools, Prompts: f.Prompts && agreed.Prompts, Resources: f.Resources && agreed.Resources}
	for _, uri := range f.URIs {
		if slices.Contains(agreed.URIs, uri) {
			out.URIs = append(out.URIs, uri)
		}
	}
	return out
}

// Empty reports whether f asks for nothing.
func (f Filter) Empty() bool {
	return !f.Tools && !f.Prompts && !f.Resources && len(f.URIs) == 0
}

// Agreed returns the part of f that a server announcing the capabilities
// of result (its initialize or server/discover result: both have a
// capabilities member) can deliver: the list_changed it announces, and
// the resource subscriptions if it takes subscriptions.
func (f Filter) Agreed(result []byte) Filter {
	var r struct {
		Capabilities struct {
			Tools     *struct{ ListChanged bool } `json:"tools"`
			Prompts   *struct{ ListChanged bool } `json:"prompts"`
			Resources *struct {
				ListChanged bool
				Subscribe   bool
			} `json:"resources"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(result, &r)
	c := r.Capabilities
	var out Filter
	out.Tools = f.Tools && c.Tools != nil && c.Tools.ListChanged
	out.Prompts = f.Prompts && c.Prompts != nil && c.Prompts.ListChanged
	out.Resources = f.Resources && c.Resources != nil && c.Resources.ListChanged
	if c.Resources != nil && c.Resources.Subscribe {
		out.URIs = f.URIs
	}
	return out
}

// Wants reports whether notification method (resources/updated: for uri)
// goes to a listen with filter f. An update may name a sub-resource of a
// URI subscribed to.
func (f Filter) Wants(method, uri string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.Tools
	case "notifications/prompts/list_changed":
		return f.Prompts
	case "notifications/resources/list_changed":
		return f.Resources
	case "notifications/resources/updated":
		return slices.ContainsFunc(f.URIs, func(s string) bool {
			return uri == s || strings.HasPrefix(uri, strings.TrimSuffix(s, "/")+"/")
		})
	}
	return false
}

// WantsMessage is Wants for notification msg, its URI read from its
// params.
func (f Filter) WantsMessage(msg *jsonrpc.Message) bool {
	method := msg.MethodName()
	var uri string
	if method == "notifications/resources/updated" {
		var p struct {
			Params struct{ URI string } `json:"params"`
		}
		_ = json.Unmarshal(msg.Raw, &p)
		uri = p.Params.URI
	}
	return f.Wants(method, uri)
}

// RequestedFilter returns the params.notifications of message raw (a
// listen request or its acknowledgement); false when it is missing or not
// a filter.
func RequestedFilter(raw []byte) (Filter, bool) {
	var p struct {
		Params struct {
			Notifications *Filter `json:"notifications"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &p) != nil || p.Params.Notifications == nil {
		return Filter{}, false
	}
	return *p.Params.Notifications, true
}

// AckMessage is the acknowledgement of a listen with raw id.
func AckMessage(id []byte, agreed Filter) []byte {
	f, _ := json.Marshal(agreed)
	msg := append([]byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"`+protocol.MetaSubscriptionID+`":`), id...)
	msg = append(append(append(msg, `},"notifications":`...), f...), "}}"...)
	return msg
}

// EndMessage is the final result of a listen with raw id that the
// gateway ends (it shuts down).
func EndMessage(id []byte) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"resultType":"complete","_meta":{"` + protocol.MetaSubscriptionID + `":` + string(id) + `}}}`)
}

// Tag returns notification msg with params._meta naming subscription id:
// for a notification of a server that knows no listen.
func Tag(msg, id []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return msg
	}
	var params map[string]json.RawMessage
	if raw, ok := m["params"]; ok {
		_ = json.Unmarshal(raw, &params)
	}
	if params == nil {
		params = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	if raw, ok := params["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[protocol.MetaSubscriptionID] = id
	params["_meta"], _ = json.Marshal(meta)
	m["params"], _ = json.Marshal(params)
	out, err := json.Marshal(m)
	if err != nil {
		return msg
	}
	return out
}

// SubscriptionSpan locates raw's member._meta["io.modelcontextprotocol/
// subscriptionId"] (member "params" or "result") when it is a string or a
// number; tagged reports that the key is there whatever its value. Slow
// path: only messages that mention the key are decoded.
func SubscriptionSpan(raw []byte, member string) (span jsonrpc.Span, tagged bool) {
	if !bytes.Contains(raw, []byte("subscriptionId")) { // the key may be escaped
		return jsonrpc.Span{}, false
	}
	d := jsontext.NewDecoder(bytes.NewReader(raw))
	for _, name := range []string{member, "_meta", protocol.MetaSubscriptionID} {
		if !enterMember(d, name) {
			return jsonrpc.Span{}, false
		}
	}
	v, err := d.ReadValue()
	if err != nil || (v.Kind() != '"' && v.Kind() != '0') {
		return jsonrpc.Span{}, true
	}
	end := int(d.InputOffset())
	return jsonrpc.Span{Start: end - len(v), End: end}, true
}

// enterMember reads the start of an object and its members up to name,
// leaving d before name's value; false when the next value is not an
// object or has no member name.
func enterMember(d *jsontext.Decoder, name string) bool {
	if d.PeekKind() != '{' {
		return false
	}
	if _, err := d.ReadToken(); err != nil {
		return false
	}
	for d.PeekKind() == '"' {
		tok, err := d.ReadToken()
		if err != nil {
			return false
		}
		if tok.String() == name {
			return true
		}
		if d.SkipValue() != nil {
			return false
		}
	}
	return false
}

// Listener is the Stream of one client's listen, in front of the client's
// own (Out): the acknowledgement goes first, notifications before it are
// dropped, and nothing follows the end. Its methods do not block (they
// hold its lock only around Out's, which must not block either).
type Listener struct {
	Out conn.Stream // the client's stream; static

	mu      sync.Mutex // orders what reaches Out
	acked   bool       // guarded by mu: the acknowledgement was sent
	ended   bool       // guarded by mu: nothing more is sent
	replied bool       // guarded by mu: Reply was called
}

// Send is a notification for the listen: dropped before the
// acknowledgement and after the end.
func (l *Listener) Send(msg []byte) { l.Deliver(nil, msg) }

// Reply ends the listen with msg (nil: without a reply).
func (l *Listener) Reply(msg []byte) { l.End(nil, nil, msg) }

// Deliver sends ack first unless it was sent (nil: not known yet, so msg
// is dropped), then msg when not nil.
func (l *Listener) Deliver(ack, msg []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if !l.acked {
		if ack == nil {
			return
		}
		l.Out.Send(ack)
		l.acked = true
	}
	if msg != nil {
		l.Out.Send(msg)
	}
}

// End sends last (after ack, when that is known and was not sent), then
// the reply, once.
func (l *Listener) End(ack, last, reply []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended && last != nil {
		if !l.acked && ack != nil {
			l.Out.Send(ack)
		}
		l.Out.Send(last)
	}
	l.ended = true
	if !l.replied {
		l.replied = true
		l.Out.Reply(reply)
	}
}

// Stop ends the listen without a reply: its client left.
func (l *Listener) Stop() {
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
}
