package front

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
)

// A URL serves a target: a configured server (/servers/NAME/...) or an
// endpoint merging several (/endpoints/NAME/..., and the default endpoint
// "all" at /mcp, /sse and /messages). A server and an endpoint may share a
// name, so sessions are keyed by target, not by name: a session's
// session.Session.Server holds its target's key, the server's name for a
// server and "endpoints/" + the name for an endpoint. No server name has a
// '/', so the keys never mix, and every lookup (a session id, a legacy
// sessionId, a Last-Event-ID, a parked stateless request) compares the
// session's key with the URL's: a session is usable only on its target's
// URLs.

// DefaultEndpoint is the endpoint served at /mcp, /sse and /messages when
// Config.Endpoints has it.
const DefaultEndpoint = "all"

// endpointKeyPrefix starts the key of an endpoint's sessions.
const endpointKeyPrefix = "endpoints/"

// Path values set on the requests the handler routes.
const (
	// serverValue names the server of /servers/{name}/... (and of a
	// host-routed request naming a server).
	serverValue = "name"
	// endpointValue names the endpoint of /endpoints/{endpoint}/... (and of
	// the default endpoint's /mcp, and of a host-routed request naming an
	// endpoint).
	endpointValue = "endpoint"
	// barePathKey marks a request served at /mcp, /sse or /messages
	// without a /servers or /endpoints prefix (routed by host, or the
	// default endpoint): its legacy endpoint URL is /messages too.
	barePathKey = "mcpgate.barePath"
	// hostRoutedKey marks a request routed by subdomain.
	hostRoutedKey = "mcpgate.hostRouted"
)

// targetIn returns the session key and backend of what r's URL serves
// among targets t, or the message of a 404 when it serves nothing.
func (h *Handler) targetIn(t *targets, r *http.Request) (string, *served, string) {
	if name := r.PathValue(endpointValue); name != "" {
		if be, ok := t.endpoints[name]; ok {
			return endpointKeyPrefix + name, be, ""
		}
		return "", nil, "mcpgate: unknown endpoint " + strconv.Quote(name)
	}
	name := r.PathValue(serverValue)
	if be, ok := t.backends[name]; ok {
		return name, be, ""
	}
	if r.PathValue(hostRoutedKey) != "" && len(t.endpoints) > 0 {
		return "", nil, "mcpgate: unknown server or endpoint " + strconv.Quote(name)
	}
	return "", nil, "mcpgate: unknown server " + strconv.Quote(name)
}

// routeHost sets the path values of a request routed by subdomain to
// name: a server of that name if there is one (servers first), else an
// endpoint of that name, else (for the 404) a server.
func (h *Handler) routeHost(r *http.Request, name string) {
	t := h.loadTargets()
	_, server := t.backends[name]
	_, endpoint := t.endpoints[name]
	if endpoint && !server {
		r.SetPathValue(endpointValue, name)
	} else {
		r.SetPathValue(serverValue, name)
	}
	r.SetPathValue(hostRoutedKey, "1")
	r.SetPathValue(barePathKey, "1")
}

// serveDefault serves the default endpoint at a bare path with serve;
// while there is none, Config.BareServer if set, else nothing (404).
func (h *Handler) serveDefault(serve http.HandlerFunc) http.HandlerFunc {
	withDefault := h.withDefault(serve)
	return func(w http.ResponseWriter, r *http.Request) {
		t := h.loadTargets()
		if _, ok := t.endpoints[DefaultEndpoint]; ok {
			withDefault(w, r)
			return
		}
		if name := h.cfg.BareServer; name != "" {
			if _, ok := t.backends[name]; ok {
				r.SetPathValue(serverValue, name)
				r.SetPathValue(barePathKey, "1")
				serve(w, r)
				return
			}
		}
		h.notFound(w, r)
	}
}

// withDefault serves the default endpoint at a bare path with serve, which
// answers itself when there is none.
func (h *Handler) withDefault(serve http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.SetPathValue(endpointValue, DefaultEndpoint)
		r.SetPathValue(barePathKey, "1")
		serve(w, r)
	}
}

// describe names a target in a client's error message: `server NAME` or
// `endpoint NAME`.
func describe(key string) string {
	if name, ok := strings.CutPrefix(key, endpointKeyPrefix); ok {
		return "endpoint " + name
	}
	return "server " + key
}

// logTarget is a target as a log attribute: server=NAME or endpoint=NAME.
func logTarget(key string) slog.Attr {
	if name, ok := strings.CutPrefix(key, endpointKeyPrefix); ok {
		return slog.String("endpoint", name)
	}
	return slog.String("server", key)
}

// messagesPath is the path a legacy session of target key POSTs to.
func messagesPath(r *http.Request, key string) string {
	if r.PathValue(barePathKey) != "" {
		return "/messages"
	}
	if name, ok := strings.CutPrefix(key, endpointKeyPrefix); ok {
		return "/endpoints/" + name + "/messages"
	}
	return "/servers/" + key + "/messages"
}

// EndpointKey is the target key of endpoint name (Config.Policies).
func EndpointKey(name string) string { return endpointKeyPrefix + name }
