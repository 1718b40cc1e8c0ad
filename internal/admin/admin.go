// Package admin serves the gateway's admin API (JSON under /admin/) and its
// status page (/status): what an operator asks of a running gateway (its
// servers' processes and states, the live sessions, the request rate, the
// clients and grants of its own authorization server) and what it may do
// (end a session, restart a shared server's process, revoke a grant,
// delete a client).
//
// One of several replicas (gateway.cluster) answers for itself: its
// summary and status page name it (Source.Cluster), each session says
// which replica opened it and whether any replica may serve it, and a
// session another replica holds is ended there through the Source, given
// its whole id (docs/operations.md, "With several replicas").
//
// The gateway builds a Handler on a Source (its servers and the HTTP
// front's sessions, and its authorization server when it has one) and
// serves it on the main listener or on a listener of its own
// (gateway.admin.listen). The package imports only auth: it sees the
// gateway through Source and AuthServer (oauth.go).
//
// Every request needs the admin token (Config.Token, compared in constant
// time) or a principal that the gateway's Authenticator accepts and whose
// scopes include one of Config.Scopes, sent as "Authorization: Bearer" or,
// from a browser, as the HttpOnly SameSite=Strict cookie that /status sets
// (status.go). Without credentials: 401 with WWW-Authenticate; a principal
// that is not an admin: 403. A request whose Origin is not the gateway's own
// is refused (403) before anything else, so that no other site's page can
// use a browser's cookie, whatever the browser does with SameSite.
//
// A Handler holds no lock while it asks the Source; its only state is the
// tools cache (tools.go), guarded by its own mutex.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
)

// Errors a Source returns, which the API maps to HTTP statuses.
var (
	// ErrNotFound: no such server or session (404).
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous: several sessions have the id prefix given (409).
	ErrAmbiguous = errors.New("several sessions have that id prefix: give more of the id")
	// ErrNoProcess: the server has no process of its own to restart (409).
	ErrNoProcess = errors.New("the server has no shared process")
	// ErrOwnerGone: the replica that held the session is gone, and the
	// session with it (404).
	ErrOwnerGone = errors.New("the replica that held the session is gone, and the session with it")
	// ErrOwnerUnreachable: the replica holding the session did not answer
	// (502).
	ErrOwnerUnreachable = errors.New("the replica holding the session did not answer")
)

// Server is one configured server as the admin API reports it.
type Server struct {
	Name      string `json:"name"`
	Type      string `json:"type"`      // "stdio", "http", "sse"
	Isolation string `json:"isolation"` // "shared", "session"
	// State is as /readyz words it: "ready", "starting", "backing off:
	// ...", "per session", or "disabled".
	State string `json:"state"`
	// Disabled: "disabled": true in the config; never started.
	Disabled bool     `json:"disabled,omitempty"`
	Ready    bool     `json:"ready"`
	PID      int      `json:"pid"`      // the shared process's; 0: none running
	Restarts uint64   `json:"restarts"` // of the shared process
	LastExit string   `json:"lastExit"` // its last exit the gateway did not ask for
	Stderr   []string `json:"stderr"`   // its last stderr lines: untrusted text
	// Processes counts the processes (or upstream sessions) that sessions
	// own, for a server whose processes are per session.
	Processes int `json:"processes"`
	Pending   int `json:"pending"` // requests in flight upstream
	// Pool is each process of a shared server with "processes" above 1,
	// in pool order (PID, Restarts, LastExit and Stderr above are the
	// first's); omitted otherwise.
	Pool []Process `json:"pool,omitempty"`
	// Tools are the names of its tools (shared process only; null when
	// not known), ToolsError why they are not.
	Tools      []string `json:"tools"`
	ToolsError string   `json:"toolsError,omitempty"`
}

// Process is one process of a shared server's pool.
type Process struct {
	PID      int    `json:"pid"` // 0: not running
	State    string `json:"state"`
	Restarts uint64 `json:"restarts"`
	LastExit string `json:"lastExit"`
	Sessions int    `json:"sessions"` // sessions pinned to it
	Pending  int    `json:"pending"`  // requests in flight to it
}

// Session is one live session. ID is the first 8 characters of its id,
// never the whole: the id is the session's credential.
//
// With several replicas (gateway.cluster), each lists the sessions it
// holds; Owner is the replica that opened the session, as its sealed id
// says. An owner-bound session lives on its owner only; a portable one is
// served by whichever replica a request lands on, and listed by each
// that holds it.
type Session struct {
	ID          string    `json:"id"`
	Target      string    `json:"target"`  // a server's name, or "endpoints/NAME"
	Version     string    `json:"version"` // its protocol version (its era)
	Legacy      bool      `json:"legacy"`  // a 2024-11-05 HTTP+SSE session
	Principal   string    `json:"principal"`
	Opened      time.Time `json:"opened"`
	AgeSeconds  float64   `json:"ageSeconds"`
	IdleSeconds float64   `json:"idleSeconds"` // 0 while active
	Active      int       `json:"active"`      // requests in flight and open streams
	Requests    uint64    `json:"requests"`
	// Owner is the replica that opened the session; nil with one replica.
	Owner *Replica `json:"owner,omitempty"`
	// Portable: any replica can serve the session (it has a handoff
	// record); else it lives on its owner only.
	Portable bool `json:"portable"`
	// EndedOn says, in an answer to DELETE, how the session was ended:
	// "here" (this replica held it; a portable one is revoked on the
	// others too), "owner" (its owner ended it at this replica's request)
	// or "cluster" (a portable session revoked on every replica).
	EndedOn string `json:"endedOn,omitempty"`
}

// Replica is one gateway replica of a cluster.
type Replica struct {
	Instance  string `json:"instance"`  // its id for one process life
	Advertise string `json:"advertise"` // host:port the other replicas reach it at
	Self      bool   `json:"self"`      // the replica answering
}

// Cluster is the replicas as the answering one sees them.
type Cluster struct {
	Replica
	// LiveReplicas counts the replicas with a recent heartbeat, this one
	// included (1 without Redis).
	LiveReplicas int `json:"liveReplicas"`
	// Redis is "up", "down", or "none" (not configured).
	Redis string `json:"redis"`
}

// Source is what the API reads and acts on: the gateway. Its methods are
// called concurrently and must not block beyond their ctx.
type Source interface {
	// Servers returns every configured server (Tools left empty).
	Servers() []Server
	// Tools returns a server's tool names, bounded by ctx; ErrNoProcess
	// for a server without a shared process.
	Tools(ctx context.Context, server string) ([]string, error)
	// Sessions returns the live sessions at now.
	Sessions(now time.Time) []Session
	// EndSession ends the session whose id is, or starts with, id; its
	// requests in flight are told an administrator ended it. With a
	// cluster, a whole id of a session another replica holds is ended
	// there (ErrOwnerGone, ErrOwnerUnreachable). r is the administrator's
	// request: its context bounds the call.
	EndSession(r *http.Request, id string) (Session, error)
	// Restart restarts a shared server's process; ErrNotFound,
	// ErrNoProcess.
	Restart(server, reason string) error
	// RequestsTotal counts the requests to targets since the start.
	RequestsTotal() uint64
	// Authenticator is the gateway's (nil: none).
	Authenticator() auth.Authenticator
	// Cluster is this replica among the others; nil with one replica.
	Cluster() *Cluster
}

// Config configures a Handler.
type Config struct {
	Source Source
	// Token is the static admin token; "" for none (principals only).
	Token string
	// Scopes make an authenticated principal an admin (any one of them).
	// Default ["admin"].
	Scopes []string
	// Version is reported by /admin/summary.
	Version string
	// ToolsTTL is how long a server's tool names are reused (per process:
	// a restart asks again). Default 30s.
	ToolsTTL time.Duration
	// ToolsTimeout bounds asking a server for its tools. Default 2s.
	ToolsTimeout time.Duration
	// TrustProxyHeaders accepts an Origin naming the X-Forwarded-Host of
	// a trusted proxy (gateway.trustProxyHeaders) besides the Host: the
	// status page's own buttons behind a proxy that rewrites Host.
	TrustProxyHeaders bool
	// AuthServer is the gateway's own authorization server, whose
	// clients and grants the API lists and revokes (oauth.go); nil when
	// gateway.auth.server is off.
	AuthServer AuthServer
	Logger     *slog.Logger
}

// Handler serves /admin/ and /status.
type Handler struct {
	cfg   Config
	mux   *http.ServeMux
	start time.Time
	tools toolsCache
}

// New returns a Handler for cfg.
func New(cfg Config) *Handler {
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"admin"}
	}
	if cfg.ToolsTTL <= 0 {
		cfg.ToolsTTL = 30 * time.Second
	}
	if cfg.ToolsTimeout <= 0 {
		cfg.ToolsTimeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), start: time.Now()}
	h.tools.entries = map[string]*toolsEntry{}
	h.mux.HandleFunc("GET /admin/summary", h.summary)
	h.mux.HandleFunc("GET /admin/servers", h.servers)
	h.mux.HandleFunc("POST /admin/servers/{name}/restart", h.restart)
	h.mux.HandleFunc("GET /admin/sessions", h.sessions)
	h.mux.HandleFunc("DELETE /admin/sessions/{id}", h.endSession)
	h.oauthRoutes() // oauth.go
	h.mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody("nothing at "+r.Method+" "+r.URL.Path))
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	if !sameOrigin(r, h.cfg.TrustProxyHeaders) {
		writeJSON(w, http.StatusForbidden, errorBody("cross-origin requests are refused"))
		return
	}
	if r.URL.Path == "/status" {
		h.serveStatus(w, r) // status.go: its own login
		return
	}
	if !h.authorize(w, r, credential(r)) {
		return
	}
	h.mux.ServeHTTP(w, r)
}

// sameOrigin reports whether r has no Origin, or the gateway's own (the
// host the request names; the scheme is not compared, a proxy may end
// TLS). A page of another site can send the cookie only with its Origin.
func sameOrigin(r *http.Request, trustProxy bool) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	// The first proxy's, as the rest of the gateway reads it.
	fwd, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Host"), ",")
	return trustProxy && strings.EqualFold(u.Host, strings.TrimSpace(fwd))
}

// cookieName holds a browser's admin credential (status.go).
const cookieName = "mcpgate_admin"

// credential returns the bearer token of r, from its Authorization header
// or else the admin cookie ("" for none).
func credential(r *http.Request) string {
	if v := r.Header.Get("Authorization"); v != "" {
		scheme, tok, ok := strings.Cut(v, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return c.Value
	}
	return ""
}

// challenge is the WWW-Authenticate of a refusal.
const challenge = `Bearer realm="mcpgate admin"`

// authorize decides whether token opens the admin API for r, answering the
// request itself when it does not.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, token string) bool {
	status, why := h.check(r, token)
	if status == 0 {
		return true
	}
	refuse(w, status, why)
	return false
}

// refuse answers a refusal (401 carries the challenge).
func refuse(w http.ResponseWriter, status int, why string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	writeJSON(w, status, errorBody(why))
}

// check returns 0 when token is the admin token or an admin principal's
// credential, else the status and reason of a refusal. It never logs the
// token.
func (h *Handler) check(r *http.Request, token string) (int, string) {
	if token == "" {
		return http.StatusUnauthorized, "the admin API needs credentials (Authorization: Bearer TOKEN)"
	}
	if h.cfg.Token != "" && sameToken(token, h.cfg.Token) {
		return 0, ""
	}
	a := h.cfg.Source.Authenticator()
	if a == nil {
		return http.StatusUnauthorized, "invalid admin token"
	}
	ar := r.Clone(r.Context())
	ar.Header.Set("Authorization", "Bearer "+token)
	d := a.Authenticate(ar, auth.Target{Kind: "admin", Name: "admin", Resource: resourceURL(r)})
	switch {
	case d.Status == http.StatusForbidden:
		return http.StatusForbidden, "not an admin: " + d.Reason
	case d.Status != 0:
		return d.Status, "invalid admin credentials: " + d.Reason
	case d.Principal == nil:
		return http.StatusUnauthorized, "invalid admin credentials"
	}
	for _, s := range d.Principal.Scopes {
		if slices.Contains(h.cfg.Scopes, s) {
			return 0, ""
		}
	}
	return http.StatusForbidden, d.Principal.Kind + ":" + d.Principal.Name + " is not an admin (needs a scope of " +
		strings.Join(h.cfg.Scopes, ", ") + ")"
}

// sameToken compares two tokens in constant time, their lengths included
// (ConstantTimeCompare returns at once on a length mismatch: compare
// digests).
func sameToken(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// resourceURL is the admin API's URL as a token's audience may name it.
func resourceURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/admin"
}
