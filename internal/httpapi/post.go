package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/session"
)

// batchVersion is the only protocol version whose clients may send JSON-RPC
// batches; 2025-06-18 removed them.
const batchVersion = "2025-03-26"

// primingDelay is how long a POST's SSE stream waits for its first message
// before sending the priming event alone.
const primingDelay = 10 * time.Millisecond

// timerPool holds stopped timers for primingDelay: one per POST otherwise.
var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

func (h *Handler) post(w http.ResponseWriter, r *http.Request, name string, be Backend) {
	accept := r.Header.Get("Accept")
	if !accepts(accept, "application/json") || !accepts(accept, "text/event-stream") {
		writeError(w, http.StatusNotAcceptable, jsonrpc.CodeInvalidRequest, "mcpgate: Accept must list application/json and text/event-stream")
		return
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		writeError(w, http.StatusUnsupportedMediaType, jsonrpc.CodeInvalidRequest, "mcpgate: Content-Type must be application/json")
		return
	}
	msgs, batch, ok := h.readMessages(w, r)
	if !ok {
		return
	}
	requests := 0
	for i := range msgs {
		if msgs[i].Kind == jsonrpc.KindRequest {
			requests++
		}
	}
	if !batch && msgs[0].Kind == jsonrpc.KindRequest && msgs[0].MethodIs("initialize") {
		h.initialize(w, r, name, be, &msgs[0])
		return
	}
	s := h.lookup(w, r, name)
	if s == nil {
		return
	}
	if batch && s.Version() != batchVersion {
		writeError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "mcpgate: JSON-RPC batches are not allowed in protocol version "+s.Version())
		return
	}
	conn := connOf(s)
	if conn == nil {
		writeError(w, http.StatusNotFound, jsonrpc.CodeInvalidRequest, "mcpgate: session not found")
		return
	}
	s.Begin()
	defer func() { s.End(time.Now()) }()
	if requests == 0 {
		for i := range msgs {
			conn.Handle(r.Context(), &msgs[i], nil)
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	st := s.NewStream(requests)
	st.Attach()
	defer st.Detach()
	for i := range msgs {
		conn.Handle(r.Context(), &msgs[i], st)
	}
	if !h.respond(w, r, s, st, batch) {
		conn.Abandon(st)
	}
}

// readMessages reads and parses a POST body: one message or a batch. On
// failure it answers the request itself.
func (h *Handler) readMessages(w http.ResponseWriter, r *http.Request) (msgs []jsonrpc.Message, batch, ok bool) {
	body, err := readBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest, "mcpgate: request body over the limit")
			return nil, false, false
		}
		writeError(w, http.StatusBadRequest, jsonrpc.CodeParseError, "mcpgate: reading request body: "+err.Error())
		return nil, false, false
	}
	parts := [][]byte{body}
	if batch = jsonrpc.IsBatch(body); batch {
		if parts, err = jsonrpc.SplitBatch(body); err != nil {
			writeError(w, http.StatusBadRequest, jsonrpc.Code(err), err.Error())
			return nil, false, false
		}
	}
	msgs = make([]jsonrpc.Message, len(parts))
	for i, p := range parts {
		if msgs[i], err = jsonrpc.Parse(p); err != nil {
			writeError(w, http.StatusBadRequest, jsonrpc.Code(err), err.Error())
			return nil, false, false
		}
	}
	return msgs, batch, true
}

// readBody reads a request body of at most limit bytes: into one buffer of
// the announced length when there is one, else growing as it goes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= limit {
		// net/http ends the body at its announced length.
		buf := make([]byte, n)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

// initialize creates the session, opens its connection to the server and
// answers the client's initialize with the new session's id.
func (h *Handler) initialize(w http.ResponseWriter, r *http.Request, name string, be Backend, msg *jsonrpc.Message) {
	s, conn := h.open(w, r, name, be, false)
	if s == nil {
		return
	}
	s.Begin()
	st := s.NewStream(1)
	st.Attach()
	conn.Handle(r.Context(), msg, st)
	w.Header().Set("Mcp-Session-Id", s.ID)
	if !h.respond(w, r, s, st, false) {
		conn.Abandon(st)
	}
	st.Detach()
	s.End(time.Now())
	if v := conn.Version(); v != "" {
		s.SetVersion(v)
		h.log.Debug("session initialized", "session", s.ID, "server", name, "version", v)
		return
	}
	// The initialize failed: the session never existed for the client.
	if h.store.Remove(s.ID) != nil {
		conn.Close()
	}
}

// open creates a session and its connection to the server, or answers 503
// itself (draining, too many sessions, the server cannot be reached) and
// returns nil.
func (h *Handler) open(w http.ResponseWriter, r *http.Request, name string, be Backend, legacy bool) (*session.Session, Conn) {
	if h.draining.Load() {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, jsonrpc.CodeServerError, "mcpgate: shutting down")
		return nil, nil
	}
	s, err := h.store.Create(name, time.Now())
	if err != nil {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, jsonrpc.CodeServerError, errTooMany.Error())
		return nil, nil
	}
	if legacy {
		s.SetLegacy()
	}
	conn, err := be.Open(r.Context(), s.General())
	if err != nil {
		h.store.Remove(s.ID)
		h.log.Error("opening session failed", "server", name, "err", err)
		writeError(w, http.StatusServiceUnavailable, jsonrpc.CodeServerError, "mcpgate: server "+name+" unavailable: "+err.Error())
		return nil, nil
	}
	s.SetValue(conn)
	return s, conn
}

func isJSON(contentType string) bool {
	return strings.EqualFold(mediaType(contentType), "application/json")
}

// respond writes the replies of a POST. Sessions of 2025-11-25 and later
// get an SSE stream at once, opened by a priming event, so a client whose
// connection drops can resume with Last-Event-ID. Older sessions get one
// JSON body (an array for a batch) when only final replies come, else an SSE
// stream from the first related message on. It returns false if the client
// left before it got any event id to resume from: nobody will ever read the
// replies.
func (h *Handler) respond(w http.ResponseWriter, r *http.Request, s *session.Session, st *session.Stream, batch bool) bool {
	if s.Version() >= primingVersion {
		// Give a quick reply the chance to leave in the same write as the
		// priming event; a slow one gets its priming event after the delay.
		t := timerPool.Get().(*time.Timer)
		t.Reset(primingDelay)
		select {
		case <-st.Wake(): // sse reads the events; the signal is not needed
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop() // since Go 1.23 a stopped timer's channel holds nothing stale
		timerPool.Put(t)
		h.sse(w, r, s, st, nil, 0)
		return true
	}
	var evs []session.Event
	for {
		var done bool
		evs, done, _ = st.Next(evs, seqOf(evs))
		for _, ev := range evs {
			if !ev.Final && ev.Data != nil {
				h.sse(w, r, s, st, evs, 0)
				return true
			}
		}
		if done {
			writeJSON(w, evs, batch)
			s.Forget(st)
			return true
		}
		select {
		case <-st.Wake():
		case <-r.Context().Done():
			s.Forget(st)
			return false
		}
	}
}

func seqOf(evs []session.Event) uint64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

func writeJSON(w http.ResponseWriter, evs []session.Event, batch bool) {
	var body []byte
	n := 0
	for _, ev := range evs {
		if ev.Data == nil {
			continue // cancelled by the client: no reply
		}
		if batch {
			if n == 0 {
				body = append(body, '[')
			} else {
				body = append(body, ',')
			}
		}
		body = append(body, ev.Data...)
		n++
	}
	if n == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if batch {
		body = append(body, ']')
	}
	w.Header()["Content-Type"] = jsonContentType
	_, _ = w.Write(body)
}
