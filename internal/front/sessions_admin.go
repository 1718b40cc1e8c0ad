package front

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file is what the admin API (internal/admin, through the gateway)
// sees of the front: a read-only snapshot of the live sessions, ending one,
// and a counter of requests. Nothing here is on the request path. Ending
// a session another replica holds is sessions_admin_replicas.go.

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
	// Owner is the replica that opened the session, from its sealed id;
	// nil without a cluster. An owner-bound session lives there only; a
	// portable one may have been resumed by other replicas since.
	Owner *Replica `json:"owner,omitempty"`
	// Portable is true for a session any replica can serve: its backend
	// handed off a state another replica resumes it from.
	Portable bool `json:"portable,omitempty"`
	// EndedOn says how EndSession ended it: EndedHere, EndedByOwner or
	// EndedEverywhere ("" in a list).
	EndedOn string `json:"endedOn,omitempty"`
}

// Replica is one replica of a cluster, as a session id's claim names it.
type Replica struct {
	Instance  string `json:"instance"`
	Advertise string `json:"advertise"`
	// Self is true when it is this replica (this process life).
	Self bool `json:"self"`
}

// How EndSession ended a session (SessionInfo.EndedOn).
const (
	// EndedHere: this replica held it (a portable one is revoked on the
	// others too).
	EndedHere = "here"
	// EndedByOwner: an owner-bound session of another replica, ended by
	// that replica at this one's request.
	EndedByOwner = "owner"
	// EndedEverywhere: a portable session this replica did not hold,
	// revoked on every replica through the cluster's store.
	EndedEverywhere = "cluster"
)

// Sessions ending by EndSession.
var (
	// ErrSessionUnknown: no live session has that id or prefix.
	ErrSessionUnknown = errors.New("no such session")
	// ErrSessionAmbiguous: several live sessions have that prefix.
	ErrSessionAmbiguous = errors.New("several sessions have that id prefix")
	// ErrOwnerGone: the session's owner replica is gone (no heartbeat),
	// and its owner-bound session with it.
	ErrOwnerGone = errors.New("the replica that held the session is gone, and the session with it")
	// ErrOwnerUnreachable: the owner replica lives but did not answer.
	ErrOwnerUnreachable = errors.New("the replica holding the session did not answer")
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
		si := h.sessionInfo(s)
		si.Opened = opened
		active, last := s.Activity()
		si.Active = active
		if active == 0 {
			si.Idle = max(now.Sub(last), 0)
		}
		out = append(out, si)
	}
	return out
}

// sessionInfo is session s as an administrator sees it, without its
// activity.
func (h *Handler) sessionInfo(s *session.Session) SessionInfo {
	si := SessionInfo{
		IDPrefix: logID(s.ID), Target: s.Server, Version: s.Version(), Legacy: s.Legacy(),
		Principal: strings.Replace(s.Owner, "\x00", ":", 1), Requests: s.Requests(),
		Portable: s.Handoff() != nil,
	}
	si.Opened, _ = s.Established()
	if h.cfg.Cluster != nil {
		if c, err := openID(h.cfg.Seal, s.Server, s.ID); err == nil {
			si.Owner = h.replicaOf(c)
		}
	}
	return si
}

// replicaOf is the owner claim c names.
func (h *Handler) replicaOf(c claim) *Replica {
	return &Replica{Instance: c.instance, Advertise: c.advertise, Self: c.instance == h.cfg.Cluster.Instance()}
}

// EndSession ends the live session whose id is idOrPrefix, or the only
// one of this replica whose id starts with it (at least 4 characters), as
// a DELETE would: its requests in flight are answered with AdminEndReason
// and its streams closed; the client's next request gets 404. A portable
// session is revoked on every replica as well.
//
// With a cluster, a whole id of a session this replica does not hold is
// ended where it lives (sessions_admin_replicas.go): by its owner, or by
// revoking it everywhere. A prefix names only this replica's sessions:
// the others' are not listed here.
//
// r is the administrator's request (its context bounds the call). It
// returns the session's info, or ErrSessionUnknown, ErrSessionAmbiguous,
// ErrOwnerGone, ErrOwnerUnreachable, or the store's error revoking it.
func (h *Handler) EndSession(r *http.Request, idOrPrefix string) (SessionInfo, error) {
	si, err := h.endHere(idOrPrefix, true)
	if !errors.Is(err, ErrSessionUnknown) || h.cfg.Cluster == nil {
		return si, err
	}
	return h.endElsewhere(r, idOrPrefix)
}

// endHere ends a session of this replica's directory: the one whose id is
// idOrPrefix, or with prefixes, the only one whose id starts with it.
func (h *Handler) endHere(idOrPrefix string, prefixes bool) (SessionInfo, error) {
	if len(idOrPrefix) < 4 {
		return SessionInfo{}, ErrSessionUnknown
	}
	var found []*session.Session
	if !prefixes {
		if s := h.store.Lookup(idOrPrefix); s != nil {
			found = append(found, s)
		}
	} else {
		found = session.ByPrefix(h.store, idOrPrefix)
	}
	found = slices.DeleteFunc(found, func(s *session.Session) bool {
		_, ok := s.Established()
		return !ok
	})
	switch len(found) {
	case 0:
		return SessionInfo{}, ErrSessionUnknown
	case 1:
	default:
		return SessionInfo{}, ErrSessionAmbiguous
	}
	s := found[0]
	si := h.sessionInfo(s)
	si.EndedOn = EndedHere
	if h.store.Delete(s.ID) == nil {
		return SessionInfo{}, ErrSessionUnknown // ended meanwhile
	}
	h.revoke(s) // elsewhere.go: a portable session, on the other replicas too
	h.end(s, AdminEndReason)
	h.log.Info("session ended by an administrator", "session", logID(s.ID), logTarget(s.Server))
	return si, nil
}

// RequestsTotal returns how many requests to targets (servers and
// endpoints, any URL, refused ones included) the handler has seen.
func (h *Handler) RequestsTotal() uint64 { return h.requests.Load() }

// routeAdmin serves Config.Admin at /admin/ and /status, and, with a
// cluster, the other replicas' requests to end a session held here
// (sessions_admin_replicas.go).
func (h *Handler) routeAdmin() {
	if h.cfg.Cluster != nil {
		h.mux.HandleFunc("POST "+endSessionPath, h.serveEndSession)
	}
	if h.cfg.Admin != nil {
		h.mux.Handle("/admin/", h.cfg.Admin)
		h.mux.Handle("/status", h.cfg.Admin)
	}
}

// Authenticator returns the Authenticator the handler uses now (nil:
// none), for the admin API to authenticate its own requests.
func (h *Handler) Authenticator() auth.Authenticator { return h.authenticator() }
