package front

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file ends, from any replica, a session another replica holds: the
// admin API's DELETE of a whole session id that is not in this replica's
// directory (EndSession). The id's sealed claim says which target it is
// for and which replica opened it; then
//   - a portable session (its handoff record is in the cluster's store) is
//     revoked: every replica holding it drops it, and none resumes it;
//   - an owner-bound one is ended by its owner, which this replica asks
//     over the owner's advertised address (POST endSessionPath), the
//     request carrying a token sealed for that very id, which clients
//     cannot make;
//   - one whose owner is gone is gone too (ErrOwnerGone).
// A prefix cannot be resolved this way: no replica lists another's
// sessions, and a prefix carries no claim.

// endSessionPath is where a replica asks the owner of a session to end it.
// It is served on the main listener with the cluster on (routeAdmin).
const endSessionPath = "/.mcpgate/end-session"

// endSessionPurpose is what the token of an end-session request is sealed
// for, followed by the session's whole id: a token opens for that session
// only, and only within hopTTL.
const endSessionPurpose = "mcpgate end session\x00"

// askOwnerTimeout bounds asking an owner to end a session: ending it
// stops its process (a per-session stdio server), which takes a moment.
const askOwnerTimeout = 30 * time.Second

// maxSessionIDLen bounds a session id read from an end-session request
// (a sealed id is about 150 bytes).
const maxSessionIDLen = 1 << 10

// endElsewhere ends session id, which this replica does not hold, where it
// lives (see the file comment). r is the administrator's request: its
// context bounds the call and its Host goes on to the owner, which admits
// the request by its token, not by its Host (endSessionsAnyHost).
func (h *Handler) endElsewhere(r *http.Request, id string) (SessionInfo, error) {
	target, c, ok := h.claimOf(id)
	if !ok {
		return SessionInfo{}, ErrSessionUnknown // a prefix, or no id of this cluster's
	}
	cl := h.cfg.Cluster
	si := SessionInfo{IDPrefix: logID(id), Target: target, Legacy: c.legacy, Opened: c.created, Owner: h.replicaOf(c)}
	rec, _, stateErr := cl.State(r.Context(), id)
	if rec != nil {
		si.Version, _, _ = parseHandoffRecord(rec)
		if err := cl.Revoke(r.Context(), id, c.created.Add(h.cfg.SessionMaxAge)); err != nil {
			h.forwards.storeErrors.Add(1)
			return SessionInfo{}, fmt.Errorf("revoking the session on every replica: %w", err)
		}
		si.Portable, si.EndedOn = true, EndedEverywhere
		h.log.Info("session ended by an administrator on every replica", "session", logID(id), logTarget(target))
		return si, nil
	}
	// No handoff record, or the store cannot tell: the owner, if it
	// lives, holds the session (and revokes it, if portable).
	if c.instance == cl.Instance() {
		return SessionInfo{}, ErrSessionUnknown // it was this replica's, and it ended
	}
	if alive, known := cl.Alive(c.instance); known && !alive {
		if stateErr != nil {
			return SessionInfo{}, fmt.Errorf("%w (and the cluster's store, which would know whether another replica resumed it, failed: %v)", ErrOwnerGone, stateErr)
		}
		return SessionInfo{}, ErrOwnerGone
	}
	got, err := h.askOwner(r, c.advertise, id)
	if err != nil {
		return SessionInfo{}, err
	}
	got.Owner, got.EndedOn = si.Owner, EndedByOwner
	return got, nil
}

// claimOf finds the target whose key opens session id's claim (the claim
// is sealed for its target: each current one is tried).
func (h *Handler) claimOf(id string) (string, claim, bool) {
	t := h.loadTargets()
	keys := make([]string, 0, len(t.backends)+len(t.endpoints))
	for name := range t.backends {
		keys = append(keys, name)
	}
	for name := range t.endpoints {
		keys = append(keys, endpointKeyPrefix+name)
	}
	for _, key := range keys {
		if c, err := openID(h.cfg.Seal, key, id); err == nil {
			return key, c, true
		}
	}
	return "", claim{}, false
}

// askOwner asks the replica at advertise to end session id, and returns
// what it ended.
func (h *Handler) askOwner(r *http.Request, advertise, id string) (SessionInfo, error) {
	ctx, cancel := context.WithTimeout(r.Context(), askOwnerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+advertise+endSessionPath, strings.NewReader(id))
	if err != nil {
		return SessionInfo{}, fmt.Errorf("%w: %v", ErrOwnerUnreachable, err)
	}
	req.Host = r.Host
	req.Header.Set(hopHeader, h.cfg.Seal.Seal(endSessionPurpose+id, nil, hopTTL))
	req.Header.Set("Content-Type", "text/plain")
	// The forwarder's transport (forward.go): its dial is bounded, and it
	// follows no redirect.
	resp, err := h.forwardTransport.RoundTrip(req)
	if err != nil {
		h.log.Warn("asking the replica holding a session to end it failed", "session", logID(id), "owner", advertise, "err", err)
		return SessionInfo{}, fmt.Errorf("%w: %v", ErrOwnerUnreachable, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return SessionInfo{}, ErrSessionUnknown
	default:
		return SessionInfo{}, fmt.Errorf("%w: HTTP %d", ErrOwnerUnreachable, resp.StatusCode)
	}
	var si SessionInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&si); err != nil {
		return SessionInfo{}, fmt.Errorf("%w: its answer does not parse: %v", ErrOwnerUnreachable, err)
	}
	return si, nil
}

// endSessionsAnyHost serves the other replicas' requests to end a session
// (endSessionPath) ahead of next, the Host check: such a request carries
// the Host of the admin API it came through (askOwner), which the main
// listener's check need not allow (the admin listener is not the main
// one), and it is admitted by its sealed token, which no browser page a
// Host check keeps out can have. Without a cluster it is next.
func (h *Handler) endSessionsAnyHost(next http.Handler) http.Handler {
	if h.cfg.Cluster == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == endSessionPath {
			h.serveEndSession(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveEndSession is the owner's side of askOwner: the body is the whole
// session id, the hop header a token sealed for it by a replica of this
// cluster. It answers the SessionInfo of the session it ended (200), 404
// when it holds no such session, 403 for a token that does not open.
func (h *Handler) serveEndSession(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSessionIDLen))
	id := string(body)
	if err != nil || id == "" {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: the body must be a session id")
		return
	}
	if _, err := h.cfg.Seal.Open(endSessionPurpose+id, r.Header.Get(hopHeader)); err != nil {
		writeError(w, http.StatusForbidden, protocol.CodeInvalidRequest, "mcpgate: "+hopHeader+" is not a replica's token for this session")
		return
	}
	si, err := h.endHere(id, false)
	if err != nil {
		writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, "mcpgate: no such session here")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(si)
}
