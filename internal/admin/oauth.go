package admin

import (
	"context"
	"encoding/json"
	"net/http"
)

// AuthServer is the gateway's own OAuth authorization server
// (gateway.auth.server) as the admin API sees it: its clients and the
// grants users gave them, and the two things an administrator may do,
// revoke a grant (its tokens stop working at once) and delete a client
// (its grants with it). *authserver.Server satisfies it; this package
// does not import that one, so the lists come as the JSON arrays the
// server writes: objects with an "id", never a secret nor a hash of one.
// Its methods are called concurrently, each bounded by ctx.
type AuthServer interface {
	// AdminClients is the JSON array of the registered clients.
	AdminClients(ctx context.Context) (json.RawMessage, error)
	// AdminGrants is the JSON array of the live grants.
	AdminGrants(ctx context.Context) (json.RawMessage, error)
	// AdminRevokeGrant revokes grant id; false when there is none.
	AdminRevokeGrant(ctx context.Context, id string) (bool, error)
	// AdminDeleteClient deletes client id and revokes its grants; false
	// when there is none.
	AdminDeleteClient(ctx context.Context, id string) (bool, error)
}

// oauthRoutes adds the authorization server's routes to h's mux.
func (h *Handler) oauthRoutes() {
	h.mux.HandleFunc("GET /admin/oauth/clients", h.oauthList("clients", AuthServer.AdminClients))
	h.mux.HandleFunc("GET /admin/oauth/grants", h.oauthList("grants", AuthServer.AdminGrants))
	h.mux.HandleFunc("DELETE /admin/oauth/clients/{id}", h.oauthRemove("client", "deleted", AuthServer.AdminDeleteClient))
	h.mux.HandleFunc("DELETE /admin/oauth/grants/{id}", h.oauthRemove("grant", "revoked", AuthServer.AdminRevokeGrant))
}

// noAuthServer answers a request for the authorization server's records
// when there is none.
func noAuthServer(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, errorBody("the gateway's authorization server is off (gateway.auth.server)"))
}

// oauthList answers {name: [...]} with list's array.
func (h *Handler) oauthList(name string, list func(AuthServer, context.Context) (json.RawMessage, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		as := h.cfg.AuthServer
		if as == nil {
			noAuthServer(w)
			return
		}
		arr, err := list(as, r.Context())
		if err != nil {
			h.cfg.Logger.Warn("admin: listing the authorization server's "+name+" failed", "err", err)
			writeJSON(w, http.StatusServiceUnavailable, errorBody(name+": "+err.Error()))
			return
		}
		if len(arr) == 0 || string(arr) == "null" {
			arr = json.RawMessage("[]")
		}
		writeJSON(w, http.StatusOK, map[string]json.RawMessage{name: arr})
	}
}

// oauthRemove answers a DELETE of one record by remove: {done: id}, or
// 404 when there is no such record.
func (h *Handler) oauthRemove(what, done string, remove func(AuthServer, context.Context, string) (bool, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		as := h.cfg.AuthServer
		if as == nil {
			noAuthServer(w)
			return
		}
		id := r.PathValue("id")
		found, err := remove(as, r.Context(), id)
		switch {
		case err != nil:
			h.cfg.Logger.Warn("admin: "+what+" not "+done, "id", id, "err", err)
			writeJSON(w, http.StatusServiceUnavailable, errorBody(what+" "+quote(id)+" not "+done+": "+err.Error()))
		case !found:
			writeJSON(w, http.StatusNotFound, errorBody("no "+what+" "+quote(id)))
		default:
			h.cfg.Logger.Info(what+" "+done+" by an administrator", what, id)
			writeJSON(w, http.StatusOK, map[string]string{done: id})
		}
	}
}
