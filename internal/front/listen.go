package front

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/sse"
)

// This file serves subscriptions/listen of the stateless revision for a
// server of the session eras, which does not know it: the gateway
// acknowledges the subscription itself (with the part of the filter the
// server's capabilities can honour), subscribes to the resources it names
// (resources/subscribe, counted per URI across clients by the
// multiplexer), and forwards the server's list_changed and
// resources/updated notifications that match, each tagged with the
// subscription's id, until the client closes the stream or the gateway
// shuts down (then the listen gets its final result).

// listenFilter is the notifications member of subscriptions/listen.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// agreed returns the part of f a server with capabilities caps (its
// initialize result's) can deliver.
func (f listenFilter) agreed(init []byte) listenFilter {
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
	_ = json.Unmarshal(init, &r)
	c := r.Capabilities
	var out listenFilter
	out.ToolsListChanged = f.ToolsListChanged && c.Tools != nil && c.Tools.ListChanged
	out.PromptsListChanged = f.PromptsListChanged && c.Prompts != nil && c.Prompts.ListChanged
	out.ResourcesListChanged = f.ResourcesListChanged && c.Resources != nil && c.Resources.ListChanged
	if c.Resources != nil && c.Resources.Subscribe {
		out.ResourceSubscriptions = f.ResourceSubscriptions
	}
	return out
}

// wants reports whether the notification msg goes to a listen with filter f.
func (f listenFilter) wants(msg *jsonrpc.Message) bool {
	switch msg.MethodName() {
	case protocol.NotificationToolsListChanged:
		return f.ToolsListChanged
	case protocol.NotificationPromptsListChanged:
		return f.PromptsListChanged
	case protocol.NotificationResourcesListChanged:
		return f.ResourcesListChanged
	case protocol.NotificationResourcesUpdated:
		var p struct {
			Params struct{ URI string } `json:"params"`
		}
		_ = json.Unmarshal(msg.Raw, &p)
		return slices.ContainsFunc(f.ResourceSubscriptions, func(uri string) bool {
			return p.Params.URI == uri || strings.HasPrefix(p.Params.URI, strings.TrimSuffix(uri, "/")+"/")
		})
	}
	return false
}

// listen serves subscriptions/listen msg (id) on connection conn of
// session s: an SSE stream until the client leaves or the gateway drains.
func (h *Handler) listen(w http.ResponseWriter, r *http.Request, s *session.Session, conn conn.StatelessConn, msg *jsonrpc.Message, id []byte) {
	var p struct {
		Params struct {
			Notifications *listenFilter `json:"notifications"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msg.Raw, &p); err != nil || p.Params.Notifications == nil {
		writeErrorID(w, http.StatusBadRequest, id, protocol.CodeInvalidParams, "mcpgate: subscriptions/listen needs params.notifications (an object)", nil)
		return
	}
	init, err := conn.ServerInit(r.Context())
	if err != nil {
		writeErrorID(w, http.StatusServiceUnavailable, id, protocol.CodeServerError, err.Error(), nil)
		return
	}
	f := p.Params.Notifications.agreed(init)
	for _, uri := range f.ResourceSubscriptions {
		if !h.subscribe(r.Context(), s, conn, uri) {
			f.ResourceSubscriptions = slices.DeleteFunc(f.ResourceSubscriptions, func(u string) bool { return u == uri })
		}
	}
	general := s.General()
	general.Attach()
	defer general.Detach()

	hdr := w.Header()
	hdr["Content-Type"] = sseContentType
	hdr["Cache-Control"] = noCache
	hdr["X-Accel-Buffering"] = noBuffering
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	agreed, _ := json.Marshal(f)
	ack := `{"jsonrpc":"2.0","method":"` + protocol.NotificationSubscriptionsAcknowledged + `","params":{"_meta":{"` +
		protocol.MetaSubscriptionID + `":` + string(id) + `},"notifications":` + string(agreed) + `}}`
	buf, _ := sse.AppendEvent(nil, sse.Event{Event: "message", Data: []byte(ack)})
	if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
		return
	}
	keep := time.NewTicker(h.cfg.KeepAlive)
	defer keep.Stop()
	var evs []session.Event
	after := general.Undelivered()
	for {
		var done bool
		evs, done, _ = general.Next(evs[:0], after)
		buf = buf[:0]
		for _, ev := range evs {
			after = ev.Seq
			m, err := jsonrpc.Parse(ev.Data)
			if err != nil || m.Kind != jsonrpc.KindNotification || !f.wants(&m) {
				continue
			}
			buf, _ = sse.AppendEvent(buf, sse.Event{Event: "message", Data: tagSubscription(ev.Data, id)})
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
				return
			}
		}
		if done {
			endListen(w, id) // the session ended: shutdown
			return
		}
		select {
		case <-general.Wake():
		case <-r.Context().Done():
			return
		case <-h.drain:
			endListen(w, id)
			return
		case <-keep.C:
			if sse.WriteComment(w, "keep-alive") != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// endListen ends a listen the gateway ends (it shuts down) with the
// listen's result.
func endListen(w http.ResponseWriter, id []byte) {
	end := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"resultType":"complete","_meta":{"` + protocol.MetaSubscriptionID + `":` + string(id) + `}}}`
	buf, _ := sse.AppendEvent(nil, sse.Event{Event: "message", Data: []byte(end)})
	_, _ = w.Write(buf)
}

// subscribe subscribes conn to resource uri upstream and reports whether
// the server agreed.
func (h *Handler) subscribe(ctx context.Context, s *session.Session, conn conn.StatelessConn, uri string) bool {
	q, _ := json.Marshal(uri)
	req, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"mcpgate-listen","method":"` + protocol.MethodResourcesSubscribe + `","params":{"uri":` + string(q) + `}}`))
	if err != nil {
		return false
	}
	st := s.NewStream(1, time.Now())
	defer s.Forget(st)
	conn.Handle(ctx, &req, st)
	for {
		evs, done, _ := st.Next(nil, 0)
		if done {
			for _, ev := range evs {
				if ev.Final && ev.Data != nil {
					m, err := jsonrpc.Parse(ev.Data)
					return err == nil && !m.IsError
				}
			}
			return false
		}
		select {
		case <-st.Wake():
		case <-ctx.Done():
			return false
		}
	}
}

// tagSubscription returns notification msg with params._meta naming
// subscription id.
func tagSubscription(msg, id []byte) []byte {
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
