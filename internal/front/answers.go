package front

import (
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/session"
)

// answers remembers the requests of one POST and which of them got a final
// reply, so that when their stream closes under them (the session ended and
// its connection did not answer them) the handler still answers each one
// with an error instead of silence. It is used by the handler's goroutine
// only, and is a value on its stack: the POST hot path allocates nothing for
// it. A nil *answers records nothing (GET streams).
type answers struct {
	msgs   []jsonrpc.Message // the POST's messages; requests among them
	reqs   int               // how many are requests
	finals int
	anon   int             // finals without a message (cancelled): their id is unknown
	ids    map[string]bool // ids of the finals seen; batches only
}

// saw records an event written to the client.
func (a *answers) saw(ev session.Event) {
	if a == nil || !ev.Final {
		return
	}
	a.finals++
	if ev.Data == nil {
		a.anon++
	}
	if a.reqs < 2 || ev.Data == nil {
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
// its session ended. In a batch those are the requests whose id no final
// reply carried: a request the client cancelled ends with a final that has
// no message, hence no id, so it may get an error too (which its client
// ignores), rather than another request getting none. Never more errors
// than requests without an identified reply.
func (a *answers) missing(reason string) [][]byte {
	if a == nil {
		return nil
	}
	n := a.reqs - a.finals
	if a.reqs >= 2 {
		n = a.reqs - (a.finals - a.anon)
	}
	var out [][]byte
	for i := range a.msgs {
		if n <= 0 {
			break
		}
		m := &a.msgs[i]
		if m.Kind != jsonrpc.KindRequest {
			continue
		}
		id := m.Bytes(m.ID)
		if a.ids[string(id)] {
			continue
		}
		out = append(out, jsonrpc.ErrorResponse(id, protocol.CodeServerError, "mcpgate: no reply: "+reason))
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
