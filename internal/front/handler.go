package front

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/internal/admission"
	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/limits"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/seal"
	"github.com/mcpgate/mcpgate/internal/session"
)

// Config configures a Handler. Zero values take the documented defaults.
type Config struct {
	Backends      map[string]conn.Backend  // by server name: /servers/{name}/...
	Endpoints     map[string]conn.Backend  // by endpoint name: /endpoints/{name}/..., DefaultEndpoint also /mcp (target.go)
	OriginAllowed func(origin string) bool // nil: only requests without Origin
	MaxBodyBytes  int64                    // default 4 MiB
	// BareServer, if set, is the server also served at /mcp, /sse and
	// /messages while Endpoints has no DefaultEndpoint (the one server of
	// `mcpgate serve -- COMMAND`). Default "": those paths serve only the
	// default endpoint.
	BareServer string
	// Probes, if set, serves /healthz and /readyz (behind the Host check,
	// like everything).
	Probes        http.Handler
	KeepAlive     time.Duration // SSE keep-alive comments; default 15s
	Retry         time.Duration // SSE retry hint to clients; default 1s
	MaxSessions   int           // default 10,000
	IdleTimeout   time.Duration // default 30m
	SweepInterval time.Duration // default 30s
	// ReplayEvents is the events kept per stream for Last-Event-ID; 0: 512;
	// negative: none once a reader took them.
	ReplayEvents int
	// ReplayBytes bounds each stream's kept events (progress and log
	// messages go first; final replies are kept). Default 4 MiB.
	ReplayBytes int64
	// SessionReplayBytes bounds the events all streams of a session keep:
	// finished streams nobody reads are evicted oldest first. Default 16 MiB.
	SessionReplayBytes int64
	// ResumeGrace is how long a POST's SSE stream stays resumable with
	// Last-Event-ID after its last event was written (that write may be
	// lost with a connection breaking right then); the session's bounds may
	// evict it sooner, and Sweep or the session's next POST drops it after.
	// 0: session.DefaultResumeGrace (10s); negative: forgotten at once.
	ResumeGrace time.Duration
	// BodyReadTimeout bounds reading a request body; a stalled upload gets
	// 408 and its connection closed. Default 30s.
	BodyReadTimeout time.Duration
	// ReplyWait is how long a POST of a 2025-11-25 (or later) session waits
	// for its replies to answer them as one JSON body; past it, or at the
	// first related message, the reply becomes an SSE stream, opened by a
	// priming event, which a client can resume with Last-Event-ID. Older
	// sessions cannot resume, so they wait as long as the request takes.
	// Default 10ms.
	ReplyWait time.Duration
	// HostAllowed reports whether a request's Host (lower-cased, without
	// port or IPv6 brackets) may be served; others get 403, so a DNS
	// rebinding page cannot reach a loopback gateway. nil: every Host.
	HostAllowed func(host string) bool
	LegacyGrace time.Duration // a legacy SSE session outlives its stream this long; default 5s
	// InputWait is how long a stateless request answered input_required
	// (its server asked the client something) waits for the client's retry
	// before it is cancelled upstream. Default 2m.
	InputWait time.Duration
	// Seal seals and opens every value the Handler gives a client to give
	// back (requestState: mrtr.go, passstate.go); its owner may swap its
	// keys at any time. Default nil: a ring of one random key, made by New.
	Seal *seal.Ring
	// Cluster, if set, makes the Handler one of several replicas serving
	// the same sessions (replicas.go): session ids are sealed with Seal
	// (whose keys every replica must share), a request for a session
	// another replica holds is forwarded to it or resumed here
	// (elsewhere.go). nil: one replica.
	Cluster Cluster
	// SessionMaxAge is the absolute expiry sealed into session ids with
	// Cluster set. Default 24h.
	SessionMaxAge time.Duration
	// Sessions is where every session is created, looked up and deleted.
	// Default nil: an in-memory session.Store bounded by MaxSessions,
	// IdleTimeout and the replay settings, which bind only that default.
	Sessions session.Directory
	// HostDomain enables subdomain routing: with "mcp.example.com", host
	// "memory.mcp.example.com" serves server "memory" at /mcp, /sse and
	// /messages, or endpoint "memory" when no server has that name.
	// Default "" (off).
	HostDomain string
	// TrustProxyHeaders honours X-Forwarded-Host (routing, endpoint URLs)
	// and X-Forwarded-Proto (endpoint URLs). Default false.
	TrustProxyHeaders bool
	// Auth, if set, authenticates every request to a target (admission.go)
	// and serves the targets' RFC 9728 metadata documents (metadata.go).
	// nil: none.
	Auth auth.Authenticator
	// PublicURL is the gateway's URL as clients reach it
	// ("https://mcp.example.com", or with the path a proxy serves it
	// under): the origin of the targets' canonical resource URLs, which
	// are else the request's scheme and host (the proxy's, with
	// TrustProxyHeaders). Only used with Auth. Default "".
	PublicURL string
	// Policies decide what each principal may list and use of a target
	// (policy.go), by the target's key: a server's name, or
	// "endpoints/" + an endpoint's name. A target without one: everything.
	Policies map[string]conn.Policy
	// Limits, if set, are per-principal limits (internal/limits). nil:
	// none.
	Limits *limits.Config
	// Metrics, if set, serves /metrics (behind the Host check, no auth);
	// Observer, if set, gets a record of every client request (observe.go).
	Metrics  http.Handler
	Observer audit.Observer
	// Audit, if set, gets one line per client request POSTed to a
	// target's /mcp URL (internal/audit); its owner closes it after the
	// Handler. nil: no audit log.
	Audit *audit.Auditor
	// Admin, if set, serves /admin/ and /status (behind the Host check;
	// it authenticates its requests itself). nil: 404.
	Admin http.Handler
	// Tracer, if set, traces every client request to a target (tracing.go;
	// serve the Handler under TraceContext). nil: no tracing, no wrapping.
	Tracer trace.Tracer
	Logger *slog.Logger
}

// Handler serves the Streamable HTTP transport. See the package comment.
type Handler struct {
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
	serve http.Handler // mux behind the Host check
	store session.Directory

	// A target's URLs behind admission (admission.go).
	admittedMCP, admittedSSE, admittedMessages http.Handler

	// Replicas (replicas.go, elsewhere.go, forward.go).
	forwarder        *httputil.ReverseProxy
	forwardTransport *http.Transport // its connections, closed by Close
	forwards         forwardStats
	resumeMu         sync.Mutex
	resuming         map[string]chan struct{} // guarded by resumeMu: the resumes running, closed when done
	streamBase       uint64                   // this replica's stream numbers (sharedstreams.go)
	stateSync        stateSync                // newer handoff states for the sessions held (statesync.go)
	unstored         sync.Map                 // session id -> *session.Session whose handoff record the store has not confirmed (elsewhere.go)

	draining atomic.Bool
	closing  atomic.Bool   // Close began: no session may enter the store
	drain    chan struct{} // closed by Drain: standalone streams end
	once     sync.Once

	handlers tracker       // ServeHTTP calls in progress
	closers  tracker       // session closes started by Sweep and Close
	closeSem chan struct{} // bounds the session closes running at once

	openFailures limits.LogLimit                // "opening session failed" lines
	compat       compat                         // client quirks accepted, requests without id dropped (compat.go)
	parking      eras.Parking[*session.Session] // stateless requests and those waiting for input (stateless.go)

	paramTools paramTools // tools' Mcp-Param headers, from relayed lists (paramheaders.go)

	limits   *limits.Limiter // Config.Limits' state; nil: none
	requests atomic.Uint64   // requests to targets (sessions_admin.go)

	// tg is what requests route to (targets.go): Config's Backends,
	// Endpoints, Policies and Auth at first, swapped by SetTargets.
	tg atomic.Pointer[targets]

	// From Config.PublicURL (metadata.go): the origin and path prefix of the
	// targets' resource URLs; "" for the request's.
	publicOrigin, publicPath string
}

// New returns a Handler for cfg.
func New(cfg Config) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 10000
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 30 * time.Minute
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 30 * time.Second
	}
	if cfg.ReplayEvents == 0 {
		cfg.ReplayEvents = 512
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = 30 * time.Second
	}
	if cfg.ReplyWait <= 0 {
		cfg.ReplyWait = 10 * time.Millisecond
	}
	if cfg.LegacyGrace <= 0 {
		cfg.LegacyGrace = 5 * time.Second
	}
	if cfg.InputWait <= 0 {
		cfg.InputWait = 2 * time.Minute
	}
	if cfg.OriginAllowed == nil {
		cfg.OriginAllowed = func(o string) bool { return o == "" }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Audit = audit.Observe(cfg.Audit, cfg.Observer, isDenial) // observe.go
	if cfg.Seal == nil {
		cfg.Seal = seal.NewRandom()
	}
	if cfg.SessionMaxAge <= 0 {
		cfg.SessionMaxAge = 24 * time.Hour
	}
	if cfg.Sessions == nil {
		cfg.Sessions = session.NewStore(session.Limits{
			MaxSessions: cfg.MaxSessions, IdleTimeout: cfg.IdleTimeout, ReplayEvents: cfg.ReplayEvents,
			ReplayBytes: cfg.ReplayBytes, SessionReplayBytes: cfg.SessionReplayBytes, ResumeGrace: cfg.ResumeGrace,
		})
	}
	h := &Handler{
		cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(),
		store:    cfg.Sessions,
		drain:    make(chan struct{}),
		closeSem: make(chan struct{}, closeParallel),
		limits:   limits.New(cfg.Limits),
		resuming: map[string]chan struct{}{},
	}
	h.forwarder, h.forwardTransport = h.newForwarder()                                     // forward.go
	h.streamBase = newStreamBase()                                                         // sharedstreams.go
	h.parking.Wait, h.parking.Release, h.parking.Ring = cfg.InputWait, h.release, cfg.Seal // stateless.go
	if cfg.Cluster != nil {
		h.parking.Place = placeOf(cfg.Cluster) // stateless_elsewhere.go
	}
	h.tg.Store(newTargets(Targets{Backends: cfg.Backends, Endpoints: cfg.Endpoints, Policies: cfg.Policies, Auth: cfg.Auth}, h.policyOf, cfg.Tracer))
	if cfg.PublicURL != "" {
		var err error
		if h.publicOrigin, h.publicPath, err = admission.ParsePublicURL(cfg.PublicURL); err != nil {
			// Resource URLs then follow the requests: tokens minted for the
			// URL meant are refused (their audience differs), never the
			// other way round.
			h.log.Error("public URL ignored", "url", cfg.PublicURL, "err", err)
		}
	}
	h.routeMetadata() // 404 while there is no Authenticator (SetTargets may set one)
	if cfg.Probes != nil {
		h.mux.Handle("/healthz", cfg.Probes)
		h.mux.Handle("/readyz", cfg.Probes)
	}
	if cfg.Metrics != nil {
		h.mux.Handle("/metrics", cfg.Metrics)
	}
	h.routeAdmin() // sessions_admin.go
	// A target's URLs, behind admission (admission.go).
	h.admittedMCP = h.admitted(h.serveMCP, auditPOST)
	h.admittedSSE = h.admitted(h.serveSSE, nil)
	h.admittedMessages = h.admitted(h.serveMessages, auditAll)
	// Each URL also with a trailing slash (routes.go).
	h.route("/servers/{name}/mcp", h.admittedMCP.ServeHTTP)
	h.route("/servers/{name}/sse", h.serveSSEURL) // routes.go
	h.route("/servers/{name}/messages", h.admittedMessages.ServeHTTP)
	h.route("/endpoints/{endpoint}/mcp", h.admittedMCP.ServeHTTP)
	h.route("/endpoints/{endpoint}/sse", h.serveSSEURL)
	h.route("/endpoints/{endpoint}/messages", h.admittedMessages.ServeHTTP)
	// Always routed: serveDefault answers 404 while there is no default
	// endpoint (SetTargets may add one).
	h.route("/mcp", h.serveDefault(h.admittedMCP.ServeHTTP))
	h.route("/sse", h.serveDefault(h.serveSSEURL))
	h.route("/messages", h.serveDefault(h.admittedMessages.ServeHTTP))
	h.mux.HandleFunc("/", h.notFound)
	// The Host first, for every URL, before anything is revealed (but for
	// the other replicas' requests to end a session, admitted by their
	// sealed token: sessions_admin_replicas.go).
	h.serve = h.endSessionsAnyHost(admission.CheckHost(cfg.HostAllowed, http.HandlerFunc(h.routeRequest)))
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.handlers.add()
	defer h.handlers.done()
	h.serve.ServeHTTP(w, r)
}

// routeRequest routes a request whose Host was admitted: by subdomain
// under HostDomain, else by path.
func (h *Handler) routeRequest(w http.ResponseWriter, r *http.Request) {
	if h.cfg.HostDomain != "" {
		if name, ok := h.hostServer(r); ok {
			var serve http.HandlerFunc
			switch strings.TrimSuffix(r.URL.Path, "/") {
			case "/mcp":
				serve = h.admittedMCP.ServeHTTP
			case "/sse":
				serve = h.serveSSEURL
			case "/messages":
				serve = h.admittedMessages.ServeHTTP
			default:
				if h.authenticator() != nil && isMetadataPath(r.URL.Path) {
					serve = h.serveMetadata
				}
			}
			if serve != nil {
				h.routeHost(r, name)
				serve(w, r)
				return
			}
		}
	}
	h.mux.ServeHTTP(w, r)
}

// hostServer returns the name a request's host gives under HostDomain: a
// server's, or an endpoint's (see routeHost).
func (h *Handler) hostServer(r *http.Request) (string, bool) {
	host := r.Host
	if h.cfg.TrustProxyHeaders {
		if fwd := r.Header.Get("X-Forwarded-Host"); fwd != "" {
			host, _, _ = strings.Cut(fwd, ",")
			host = strings.TrimSpace(host)
		}
	}
	if hp, _, err := net.SplitHostPort(host); err == nil {
		host = hp
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	name, ok := strings.CutSuffix(host, "."+strings.ToLower(h.cfg.HostDomain))
	if !ok || name == "" || strings.Contains(name, ".") {
		return "", false
	}
	return name, true
}

// Sessions returns the number of live sessions.
func (h *Handler) Sessions() int { return h.store.Len() }

// connOf returns a session's connection to its server. It is nil between a
// session's creation and its Open (before its id was given to any client),
// and once the session was ended.
func connOf(s *session.Session) conn.Conn {
	return s.Value()
}

// serveSSE, serveMessages and serveMCP serve a target's URLs once the
// request was admitted (admission.go). serveSSE gets only the GETs without
// a session id of an /sse URL: the rest is Streamable HTTP (serveSSEURL).
func (h *Handler) serveSSE(w http.ResponseWriter, r *http.Request, req *admission.Request) {
	h.legacyGet(w, r, req.Key, servedOf(req))
}

func (h *Handler) serveMessages(w http.ResponseWriter, r *http.Request, req *admission.Request) {
	if h.elsewhere(w, r, req.Key, servedOf(req), r.URL.Query().Get("sessionId"), true) != here { // elsewhere.go
		return
	}
	h.legacyPost(w, r, req.Key)
}

func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request, req *admission.Request) {
	name, be := req.Key, servedOf(req)
	if id := r.Header.Get("Mcp-Session-Id"); id != "" && h.elsewhere(w, r, name, be, id, false) != here { // elsewhere.go
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, name, be)
	case http.MethodGet:
		// A GET without a session is a 2024-11-05 client (or an SDK falling
		// back to the old transport on the same URL): a legacy SSE session.
		// It must list text/event-stream itself: a bare "*/*" (curl) must not
		// open a session, let alone start a process.
		if r.Header.Get("Mcp-Session-Id") == "" {
			if !lists(r.Header.Get("Accept"), "text/event-stream") {
				// Nothing to open: no session, and not a legacy SSE client.
				// A client of the stateless revision, which has no GET, is
				// told so as that revision asks.
				w.Header().Set("Allow", "POST")
				writeError(w, http.StatusMethodNotAllowed, protocol.CodeInvalidRequest,
					"mcpgate: GET needs a session (Mcp-Session-Id), or Accept: text/event-stream to open a legacy HTTP+SSE session")
				return
			}
			h.legacyGet(w, r, name, be)
			return
		}
		h.get(w, r, name)
	case http.MethodDelete:
		if r.Header.Get("Mcp-Session-Id") == "" {
			w.Header().Set("Allow", "GET, POST")
			writeError(w, http.StatusMethodNotAllowed, protocol.CodeInvalidRequest, "mcpgate: DELETE ends a session and needs its Mcp-Session-Id")
			return
		}
		h.delete(w, r, name)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, protocol.CodeInvalidRequest, "mcpgate: method "+r.Method+" not allowed")
	}
}

// lookup finds the request's session, answering 400 or 404 itself if there
// is none.
func (h *Handler) lookup(w http.ResponseWriter, r *http.Request, name string) *session.Session {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: missing Mcp-Session-Id header")
		return nil
	}
	s := h.store.Lookup(id)
	// Another principal's session is unknown to this one: it must not
	// learn that it exists.
	if s == nil || s.Server != name || s.Legacy() || s.Owner != h.owner(r) {
		writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, "mcpgate: session not found (expired or deleted); initialize again")
		return nil
	}
	h.sessionVersion(r, s) // compat.go
	return s
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, name string) {
	s := h.lookup(w, r, name)
	if s == nil {
		return
	}
	if h.store.Delete(s.ID) != nil {
		h.revoke(s) // elsewhere.go
		h.end(s, conn.ReasonDeleted)
		h.log.Debug("session deleted", "session", logID(s.ID), logTarget(name))
	}
	w.WriteHeader(http.StatusNoContent)
}

// accepts reports whether an Accept header admits media type want
// ("type/subtype"), wildcards included.
func accepts(header, want string) bool {
	typ, _, _ := strings.Cut(want, "/")
	for len(header) > 0 {
		var part string
		part, header, _ = strings.Cut(header, ",")
		mt := mediaType(part)
		if strings.EqualFold(mt, want) || mt == "*/*" || len(mt) == len(typ)+2 && strings.EqualFold(mt[:len(typ)], typ) && mt[len(typ):] == "/*" {
			return true
		}
	}
	return false
}

// lists reports whether an Accept header names media type want itself, not
// by a wildcard.
func lists(header, want string) bool {
	for len(header) > 0 {
		var part string
		part, header, _ = strings.Cut(header, ",")
		if strings.EqualFold(mediaType(part), want) {
			return true
		}
	}
	return false
}

// mediaType returns the type/subtype of a media range or Content-Type,
// without parameters or surrounding space, and without allocating (this is
// on every request). Case is left as is: compare with strings.EqualFold.
func mediaType(v string) string {
	v, _, _ = strings.Cut(v, ";")
	return strings.TrimSpace(v)
}

// writeError answers with an HTTP status and a JSON-RPC error body (id null).
func writeError(w http.ResponseWriter, status, code int, msg string) {
	admission.WriteError(w, status, code, msg)
}

var errTooMany = errors.New("mcpgate: too many sessions")
