package front

import (
	"errors"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file is what the admin API (internal/admin, through the gateway)
// sees of the front: a read-only snapshot of the live sessions, ending one,
// and a counter of requests. Nothing here is on the request path.

// SessionInfo is one live session as an administrator sees it. It never
// holds the whole session id: the id is the session's only credential.
type SessionInfo struct {
	// IDPrefix is the first 8 characters of the id (as logs carry it).
	IDPrefix string `json:"id"`
	// Target is the server's name, or "endpoints/" + the endpoint's name.
	Target string `json:"target"`
	// Version is the negotiated protocol version ("" while a legacy
	// session has not initialized).
	Version string `json:"version"`
	// Legacy is true for a 2024-11-05 HTTP+SSE session.
	Legacy bool `json:"legacy,omitempty"`
	// Principal is KIND:NAME (key:alice, token:SUB), "" for none.
	Principal string `json:"principal"`
	// Opened is when the session was established.
	Opened time.Time `json:"opened"`
	// Active counts its requests in flight and its open streams; Idle is
	// how long it has had none (0 while Active > 0).
	Active int           `json:"active"`
	Idle   time.Duration `json:"-"`
	// Requests is how many requests it took.
	Requests uint64 `json:"requests"`
}

// Sessions ending by EndSession.
var (
	// ErrSessionUnknown: no live session has that id or prefix.
	ErrSessionUnknown = errors.New("no such session")
	// ErrSessionAmbiguous: several live sessions have that prefix.
	ErrSessionAmbiguous = errors.New("several sessions have that id prefix")
)

// AdminEndReason is what the requests in flight of a session ended by an
// administrator are told ("mcpgate: " + it).
const AdminEndReason = "the session was ended by an administrator"

// SessionList returns the established sessions (a stateless request's
// session, and one still initializing, are not listed), at now.
func (h *Handler) SessionList(now time.Time) []SessionInfo {
	all := h.store.Snapshot()
	out := make([]SessionInfo, 0, len(all))
	for _, s := range all {
		opened, ok := s.Established()
		if !ok {
			continue
		}
		active, last := s.Activity()
		si := SessionInfo{
			IDPrefix: logID(s.ID), Target: s.Server, Version: s.Version(), Legacy: s.Legacy(),
			Principal: strings.Replace(s.Owner, "\x00", ":", 1), Opened: opened,
			Active: active, Requests: s.Requests(),
		}
		if active == 0 {
			si.Idle = max(now.Sub(last), 0)
		}
		out = append(out, si)
	}
	return out
}

// EndSession ends the live session whose id is idOrPrefix, or the only
// one whose id starts with it (at least 4 characters), as a DELETE would:
// its requests in flight are answered with AdminEndReason and its streams
// closed; the client's next request gets 404. It returns the session's
// info, or ErrSessionUnknown or ErrSessionAmbiguous.
func (h *Handler) EndSession(idOrPrefix string) (SessionInfo, error) {
	if len(idOrPrefix) < 4 {
		return SessionInfo{}, ErrSessionUnknown
	}
	var found []*session.Session
	for _, s := range session.ByPrefix(h.store, idOrPrefix) {
		if _, ok := s.Established(); ok {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		return SessionInfo{}, ErrSessionUnknown
	case 1:
	default:
		return SessionInfo{}, ErrSessionAmbiguous
	}
	s := found[0]
	si := SessionInfo{IDPrefix: logID(s.ID), Target: s.Server, Version: s.Version(), Legacy: s.Legacy(),
		Principal: strings.Replace(s.Owner, "\x00", ":", 1), Requests: s.Requests()}
	si.Opened, _ = s.Established()
	if h.store.Delete(s.ID) == nil {
		return SessionInfo{}, ErrSessionUnknown // ended meanwhile
	}
	h.end(s, AdminEndReason)
	h.log.Info("session ended by an administrator", "session", logID(s.ID), logTarget(s.Server))
	return si, nil
}

// RequestsTotal returns how many requests to targets (servers and
// endpoints, any URL, refused ones included) the handler has seen.
func (h *Handler) RequestsTotal() uint64 { return h.requests.Load() }

// routeAdmin serves Config.Admin at /admin/ and /status.
func (h *Handler) routeAdmin() {
	if h.cfg.Admin != nil {
		h.mux.Handle("/admin/", h.cfg.Admin)
		h.mux.Handle("/status", h.cfg.Admin)
	}
}

// Authenticator returns the Authenticator the handler uses now (nil:
// none), for the admin API to authenticate its own requests.
func (h *Handler) Authenticator() auth.Authenticator { return h.authenticator() }
