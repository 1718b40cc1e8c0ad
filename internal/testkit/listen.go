package testkit

import (
	"encoding/json"
	"strings"
)

// subscriptionKey is the _meta key of the 2026-07-28 revision naming the
// listen a notification (or a listen's final result) belongs to.
const subscriptionKey = "io.modelcontextprotocol/subscriptionId"

// listenFilter is the params.notifications of subscriptions/listen.
type listenFilter struct {
	Tools     bool     `json:"toolsListChanged,omitempty"`
	Prompts   bool     `json:"promptsListChanged,omitempty"`
	Resources bool     `json:"resourcesListChanged,omitempty"`
	URIs      []string `json:"resourceSubscriptions,omitempty"`
}

// wants reports whether the listen gets notification method (for
// notifications/resources/updated: about uri, which may be a sub-resource
// of a URI subscribed to).
func (f listenFilter) wants(method, uri string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.Tools
	case "notifications/prompts/list_changed":
		return f.Prompts
	case "notifications/resources/list_changed":
		return f.Resources
	case "notifications/resources/updated":
		for _, s := range f.URIs {
			if uri == s || strings.HasPrefix(uri, strings.TrimSuffix(s, "/")+"/") {
				return true
			}
		}
	}
	return false
}

// fakeListen is one open subscriptions/listen (FakeOptions.Modern).
type fakeListen struct {
	id     json.RawMessage
	filter listenFilter
	ended  chan struct{} // closed when the tool end_listens ended it
}

// listen serves subscriptions/listen as a server of the 2026-07-28
// revision: it is acknowledged (agreeing to everything asked), gets the
// notifications of list_changed and touch its filter selects, tagged with
// its id, and ends with a final result (tagged too) when it is cancelled
// (as the Go SDK does) or the tool end_listens ends it.
func (s *server) listen(m message, done <-chan struct{}) {
	var p struct {
		Notifications *listenFilter `json:"notifications"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.Notifications == nil {
		s.replyError(m.ID, codeInvalidParams, "params.notifications is required")
		return
	}
	key := idKey(m.ID)
	l := &fakeListen{id: m.ID, filter: *p.Notifications, ended: make(chan struct{})}
	s.lmu.Lock()
	if s.listens[key] != nil {
		s.lmu.Unlock()
		s.replyError(m.ID, codeInvalidRequest, "a listen with this id is open")
		return
	}
	s.listens[key] = l
	s.notify("notifications/subscriptions/acknowledged", map[string]any{
		"notifications": l.filter,
		"_meta":         map[string]any{subscriptionKey: l.id},
	})
	s.lmu.Unlock()
	select {
	case <-done:
		s.lmu.Lock()
		if s.listens[key] == l {
			delete(s.listens, key)
			s.endListenLocked(l)
		}
		s.lmu.Unlock()
	case <-l.ended:
	}
}

// endListenLocked writes listen l's final result. lmu is held.
func (s *server) endListenLocked(l *fakeListen) {
	s.reply(l.id, map[string]any{"resultType": "complete", "_meta": map[string]any{subscriptionKey: l.id}})
}

// endListens ends every open listen with its final result and returns how
// many there were.
func (s *server) endListens() int {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	n := len(s.listens)
	for key, l := range s.listens {
		delete(s.listens, key)
		s.endListenLocked(l)
		close(l.ended)
	}
	return n
}

// toListens sends notification method with params (an object, without
// _meta) to each open listen that selects it, tagged with its id, and
// reports whether any listen was open: a server with none sends the
// notification untagged, as in the session eras.
func (s *server) toListens(method, uri string, params map[string]any) bool {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if len(s.listens) == 0 {
		return false
	}
	for _, l := range s.listens {
		if !l.filter.wants(method, uri) {
			continue
		}
		p := map[string]any{"_meta": map[string]any{subscriptionKey: l.id}}
		for k, v := range params {
			p[k] = v
		}
		s.notify(method, p)
	}
	return true
}
