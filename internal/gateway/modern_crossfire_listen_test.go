package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// The listens of the modern crossfire (modern_crossfire_test.go): their
// filters, their streams, and what each must have received.

// crossFilter is a listen's filter as the test reads it.
type crossFilter struct {
	Tools     bool     `json:"toolsListChanged,omitempty"`
	Prompts   bool     `json:"promptsListChanged,omitempty"`
	Resources bool     `json:"resourcesListChanged,omitempty"`
	URIs      []string `json:"resourceSubscriptions,omitempty"`
}

func (f crossFilter) equal(g crossFilter) bool {
	return f.Tools == g.Tools && f.Prompts == g.Prompts && f.Resources == g.Resources && slices.Equal(f.URIs, g.URIs)
}

// wants is the revision's rule: a listen gets a list_changed of the kinds
// it asked for, and resources/updated for a URI it subscribed to or one
// under it.
func (f crossFilter) wants(method, uri string) bool {
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

// crossEvent is a tool call that makes the server notify its listens.
type crossEvent struct {
	tool, arg, value string // e.g. list_changed kind tools, touch uri mem://a
}

// note is the notification the event makes, and its URI.
func (e crossEvent) note() (method, uri string) {
	if e.tool == "touch" {
		return "notifications/resources/updated", e.value
	}
	return "notifications/" + e.value + "/list_changed", ""
}

// crossListen is one client's subscriptions/listen: what it got so far.
type crossListen struct {
	name, id string
	want     crossFilter
	cancel   context.CancelFunc

	mu      sync.Mutex
	msgs    []json.RawMessage
	ended   bool  // the stream ended
	err     error // why, if not with the end of the body
	changed chan struct{}
}

// openListen starts a listen with raw id and filter (JSON) and reads its
// stream until it ends or the listen is cancelled.
func openListen(ctx context.Context, g *testGateway, name, id, filter string) *crossListen {
	ctx, cancel := context.WithCancel(ctx)
	l := &crossListen{name: name, id: id, cancel: cancel, changed: make(chan struct{}, 1)}
	if err := json.Unmarshal([]byte(filter), &l.want); err != nil {
		panic(err)
	}
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{"notifications":` + filter + `,` + crossMeta("") + `}}`
	go func() {
		var err error
		defer func() {
			l.mu.Lock()
			l.ended, l.err = true, err
			l.mu.Unlock()
			l.signal()
		}()
		var resp *http.Response
		resp, err = crossPost(ctx, g, "subscriptions/listen", "", body)
		if err != nil {
			return
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			err = fmt.Errorf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			return
		}
		_, err = readMessages(resp, func(m json.RawMessage) bool {
			l.mu.Lock()
			l.msgs = append(l.msgs, m)
			l.mu.Unlock()
			l.signal()
			return true
		})
	}()
	return l
}

func (l *crossListen) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// waitUntil waits until cond holds for what the listen got, the stream
// ended, or ctx is done; it reports whether cond held.
func (l *crossListen) waitUntil(ctx context.Context, cond func(msgs []json.RawMessage, ended bool) bool) bool {
	for {
		l.mu.Lock()
		ok, ended := cond(l.msgs, l.ended), l.ended
		l.mu.Unlock()
		if ok {
			return true
		}
		if ended {
			return false
		}
		select {
		case <-l.changed:
		case <-ctx.Done():
			return false
		}
	}
}

func (l *crossListen) snapshot() ([]json.RawMessage, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs), l.ended, l.err
}

// check checks everything listen l got: its acknowledgement first (its
// own id, its own filter), then only notifications its filter selects,
// tagged with its own id; with final, then the server's end of the listen
// as a final result with its own id in the id and the tag. counts, if not
// nil, are the notifications it must have got by method (resources/updated
// by URI: "notifications/resources/updated mem://a").
func (l *crossListen) check(final bool, counts map[string]int) (crossed bool, err error) {
	msgs, _, rerr := l.snapshot()
	if final && rerr != nil {
		return false, fmt.Errorf("%s (id %s): stream error %v after %q", l.name, l.id, rerr, msgs)
	}
	if len(msgs) == 0 {
		return false, fmt.Errorf("%s (id %s): no acknowledgement (%v)", l.name, l.id, rerr)
	}
	got := map[string]int{}
	for i, raw := range msgs {
		if crossMarker.Match(raw) {
			return true, fmt.Errorf("%s (id %s) got a call's payload: %s", l.name, l.id, raw)
		}
		var m crossMsg
		if err := json.Unmarshal(raw, &m); err != nil {
			return false, fmt.Errorf("%s: message %d %q: %v", l.name, i, raw, err)
		}
		last := i == len(msgs)-1
		switch {
		case i == 0:
			var agreed crossFilter
			if m.Method != "notifications/subscriptions/acknowledged" || !bytes.Equal(m.Params.Meta.Sub, []byte(l.id)) ||
				json.Unmarshal(m.Params.Notifications, &agreed) != nil || !agreed.equal(l.want) {
				return !bytes.Equal(m.Params.Meta.Sub, []byte(l.id)), fmt.Errorf("%s (id %s, filter %+v): first message %s, want its acknowledgement", l.name, l.id, l.want, raw)
			}
		case final && last:
			if m.Method != "" || !bytes.Equal(m.ID, []byte(l.id)) || m.Result == nil || !bytes.Equal(m.Result.Meta.Sub, []byte(l.id)) {
				return !bytes.Equal(m.ID, []byte(l.id)), fmt.Errorf("%s (id %s): last message %s, want the listen's final result with its id", l.name, l.id, raw)
			}
		case m.Method == "notifications/subscriptions/acknowledged":
			return false, fmt.Errorf("%s (id %s): acknowledged again (message %d): %s", l.name, l.id, i, raw)
		case m.Method == "":
			return !bytes.Equal(m.ID, []byte(l.id)), fmt.Errorf("%s (id %s): a response as message %d of %d: %s", l.name, l.id, i+1, len(msgs), raw)
		default:
			if !bytes.Equal(m.Params.Meta.Sub, []byte(l.id)) {
				return true, fmt.Errorf("%s (id %s): message %d tagged %s: %s", l.name, l.id, i, m.Params.Meta.Sub, raw)
			}
			if !l.want.wants(m.Method, m.Params.URI) {
				return true, fmt.Errorf("%s (id %s, filter %+v): message %d not selected by its filter: %s", l.name, l.id, l.want, i, raw)
			}
			key := m.Method
			if m.Params.URI != "" {
				key += " " + m.Params.URI
			}
			got[key]++
		}
	}
	if counts != nil {
		for k, n := range counts {
			if got[k] != n {
				return false, fmt.Errorf("%s (id %s, filter %+v): %d of %s, want %d (all: %v)", l.name, l.id, l.want, got[k], k, n, got)
			}
		}
		for k, n := range got {
			if counts[k] == 0 {
				return false, fmt.Errorf("%s (id %s): %d of %s, want none", l.name, l.id, n, k)
			}
		}
	}
	return false, nil
}

// acked reports whether msgs hold the acknowledgement.
func acked(msgs []json.RawMessage, _ bool) bool { return len(msgs) > 0 }
