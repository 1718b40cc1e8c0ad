package httpapi

import (
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/session"
)

// answers remembers the requests of one POST and which of them got a final
// reply, so that when their stream closes under them (the session ended and
// its connection did not answer them) the handler still answers each one
// with an error instead of silence. It is used by the handler's goroutine
// only. A nil *answers records nothing (GET streams).
type answers struct {
	reqs   []*jsonrpc.Message
	finals int
	ids    map[string]bool // ids of the finals seen; batches only
}

func newAnswers(msgs []jsonrpc.Message, requests int) *answers {
	a := &answers{reqs: make([]*jsonrpc.Message, 0, requests)}
	for i := range msgs {
		if msgs[i].Kind == jsonrpc.KindRequest {
			a.reqs = append(a.reqs, &msgs[i])
		}
	}
	return a
}

// saw records an event written to the client.
func (a *answers) saw(ev session.Event) {
	if a == nil || !ev.Final {
		return
	}
	a.finals++
	if len(a.reqs) < 2 || ev.Data == nil {
		return // one request: counting is enough
	}
	// Batches only (2025-03-26), and only for this rare path's sake: which
	// ids were answered.
	if m, err := jsonrpc.Parse(ev.Data); err == nil && m.ID.Present() {
		if a.ids == nil {
			a.ids = map[string]bool{}
		}
		a.ids[string(m.Bytes(m.ID))] = true
	}
}

// missing returns an error reply for each request not answered, citing why
// its session ended.
func (a *answers) missing(reason string) [][]byte {
	if a == nil {
		return nil
	}
	n := len(a.reqs) - a.finals
	var out [][]byte
	for _, m := range a.reqs {
		if n <= 0 {
			break
		}
		id := m.Bytes(m.ID)
		if a.ids[string(id)] {
			continue
		}
		out = append(out, jsonrpc.ErrorResponse(id, jsonrpc.CodeServerError, "mcpgate: no reply: "+reason))
		n--
	}
	return out
}

// closeReason says why a session ended, for the errors the handler writes.
func closeReason(s *session.Session) string {
	if r := s.CloseReason(); r != "" {
		return r
	}
	return "the session ended"
}
