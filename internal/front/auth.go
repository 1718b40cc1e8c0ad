package front

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is the front's part of authentication (Config.Auth). Every
// request to a target (a server or an endpoint, on any URL of either era,
// routed by path or by host) is put to the Authenticator after the Host
// and Origin checks and before anything else: a refusal is 401 or 403 with
// the Decision's WWW-Authenticate and a JSON-RPC error, and reveals
// nothing of sessions, versions or servers' states. The principal of a
// request that may go on travels in its context (Principal), to the
// backends' Open and Handle; a session belongs to the principal that
// opened it (session.Session.Owner), and is unknown (404) to anyone else,
// as is a parked stateless request's requestState (mrtr.go).
//
// A target is one protected resource (RFC 9728) whatever its URL: its
// canonical URL is its /mcp URL (/servers/NAME/mcp, /endpoints/NAME/mcp,
// or /mcp for the default endpoint and a host-routed one) on the origin
// the client sees: Config.PublicURL, else the request's scheme and host
// (X-Forwarded-Proto and X-Forwarded-Host when TrustProxyHeaders). Its
// /sse and /messages are the same resource. Its metadata document is
// served, without credentials and to any origin, at the path-inserted
// well-known URL of its canonical URL, and the default endpoint's (or a
// host-routed target's) also at the well-known root.

// wellKnownPRM is the well-known path of RFC 9728 metadata documents.
const wellKnownPRM = "/.well-known/oauth-protected-resource"

type principalKey struct{}

// WithPrincipal returns ctx carrying principal p, as the front gives it to
// a request's handling.
func WithPrincipal(ctx context.Context, p *auth.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Principal returns the principal of the request whose handling got ctx
// (Backend.Open, StatelessBackend.OpenStateless and Conn.Handle get the
// request's context), or nil: authentication is off, or the target is not
// protected and the request named nobody.
func Principal(ctx context.Context) *auth.Principal {
	p, _ := ctx.Value(principalKey{}).(*auth.Principal)
	return p
}

// ownerKey is a principal as a session's owner: kind and name ("" for
// none). The kind has no NUL, so no two principals share a key.
func ownerKey(p *auth.Principal) string {
	if p == nil {
		return ""
	}
	return p.Kind + "\x00" + p.Name
}

// owner is the owner key of the principal of r (authenticated by front).
func (h *Handler) owner(r *http.Request) string {
	if h.authenticator() == nil {
		return ""
	}
	return ownerKey(Principal(r.Context()))
}

// authenticate asks Authenticator a about r, a request to target key. It
// returns r with its principal in its context, or answers the request
// itself with the refusal and returns false.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, key string, a auth.Authenticator) (*http.Request, bool) {
	target, ok := h.authTarget(r, key)
	if !ok {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: the request's host (Host or X-Forwarded-Host) is not a valid host name")
		return nil, false
	}
	start := time.Now()
	if h.cfg.Audit != nil {
		start = h.cfg.Audit.now()
	}
	d := a.Authenticate(r, target)
	if d.Status == 0 {
		if d.Principal == nil {
			return r, true
		}
		return r.WithContext(WithPrincipal(r.Context(), d.Principal)), true
	}
	status := d.Status
	if status < 400 || status > 599 {
		status = http.StatusUnauthorized
	}
	// A challenge that could split the header (it never should) is left
	// out rather than sent.
	if d.Challenge != "" && !strings.ContainsAny(d.Challenge, "\r\n\x00") {
		w.Header().Set("WWW-Authenticate", d.Challenge)
	}
	if status == http.StatusServiceUnavailable && d.RetryAfter > 0 {
		// The credentials cannot be checked now (an issuer out of reach).
		w.Header().Set("Retry-After", retryAfter(d.RetryAfter))
	}
	reason := d.Reason
	if reason == "" {
		reason = "authentication required"
		if status == http.StatusForbidden {
			reason = "insufficient scope"
		}
	}
	h.log.Debug("request refused by authentication", logTarget(key), "status", status, "reason", d.Reason)
	writeError(w, status, protocol.CodeInvalidRequest, "mcpgate: "+reason+" for "+describe(key))
	h.auditAuthRefusal(r, key, start, status, d.Refused) // audit.go
	return nil, false
}

// authTarget is the protected resource of target key as request r names
// it; false when r's host is not a valid host name.
func (h *Handler) authTarget(r *http.Request, key string) (auth.Target, bool) {
	origin, ok := h.publicOrigin, true
	if origin == "" {
		origin, ok = requestOrigin(r, h.cfg.TrustProxyHeaders)
	}
	t := auth.Target{Kind: "server", Name: key}
	if name, isEndpoint := strings.CutPrefix(key, endpointKeyPrefix); isEndpoint {
		t.Kind, t.Name = "endpoint", name
	}
	path := h.publicPath + mcpURLPath(r, key)
	t.Resource = origin + path
	t.Metadata = origin + wellKnownPRM + path
	return t, ok
}

// mcpURLPath is the path of target key's /mcp URL as r reached it.
func mcpURLPath(r *http.Request, key string) string {
	if r.PathValue(barePathKey) != "" {
		return "/mcp"
	}
	if name, ok := strings.CutPrefix(key, endpointKeyPrefix); ok {
		return "/endpoints/" + name + "/mcp"
	}
	return "/servers/" + key + "/mcp"
}

// serveMetadata serves the RFC 9728 metadata document of the target its
// path names: to anyone (no Origin check, no credentials, CORS open to
// every origin), 404 when the target is unknown or not protected.
func (h *Handler) serveMetadata(w http.ResponseWriter, r *http.Request) {
	if h.authenticator() == nil {
		h.notFound(w, r) // as if not routed: nothing is protected
		return
	}
	hdr := w.Header()
	hdr.Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		// A CORS preflight: browser clients send MCP-Protocol-Version.
		hdr.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
		hdr.Set("Access-Control-Allow-Headers", "*, Authorization, Mcp-Protocol-Version")
		hdr.Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		hdr.Set("Allow", "GET, HEAD, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, protocol.CodeInvalidRequest, "mcpgate: method "+r.Method+" not allowed")
		return
	}
	notFound := "mcpgate: no protected resource metadata at " + r.URL.Path
	t := h.loadTargets()
	key, be, _ := h.targetIn(t, r)
	if be == nil || t.auth == nil { // t.auth: SetTargets may just have removed it
		writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, notFound)
		return
	}
	target, ok := h.authTarget(r, key)
	if !ok {
		writeError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "mcpgate: the request's host (Host or X-Forwarded-Host) is not a valid host name")
		return
	}
	doc, protected := t.auth.Metadata(target)
	if !protected {
		writeError(w, http.StatusNotFound, protocol.CodeInvalidRequest, notFound)
		return
	}
	writeBody(w, doc)
}

// routeMetadata registers the metadata documents' URLs.
func (h *Handler) routeMetadata() {
	// The documents of the targets' URLs with a trailing slash too
	// (routes.go): a client given one looks there.
	h.route(wellKnownPRM+"/servers/{name}/mcp", h.serveMetadata)
	h.route(wellKnownPRM+"/endpoints/{endpoint}/mcp", h.serveMetadata)
	// The default endpoint's, path-inserted and at the root (where
	// clients look when they have no resource_metadata URL); a 404 when
	// there is none.
	h.route(wellKnownPRM+"/mcp", h.withDefault(h.serveMetadata))
	h.mux.HandleFunc(wellKnownPRM, h.withDefault(h.serveMetadata))
}

// isMetadataPath reports whether a host-routed request's path is its
// target's metadata document.
func isMetadataPath(path string) bool {
	return path == wellKnownPRM || strings.TrimSuffix(path, "/") == wellKnownPRM+"/mcp"
}

// requestOrigin is the canonical origin ("scheme://host[:port]", lower
// case, no default port) a client reached r at: its scheme and Host, or,
// when proxy headers are trusted, the first proxy's X-Forwarded-Proto and
// X-Forwarded-Host. It reports false when the host is not a valid host
// name (it would not make a URL, and must not reach a header).
func requestOrigin(r *http.Request, trustProxy bool) (string, bool) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if trustProxy {
		if p := firstField(r.Header.Get("X-Forwarded-Proto")); strings.EqualFold(p, "https") || strings.EqualFold(p, "http") {
			scheme = strings.ToLower(p)
		}
		if fh := firstField(r.Header.Get("X-Forwarded-Host")); fh != "" {
			host = fh
		}
	}
	return canonicalOrigin(scheme, host)
}

// firstField is the first of a comma-separated header's values, trimmed:
// the first proxy's view.
func firstField(v string) string {
	v, _, _ = strings.Cut(v, ",")
	return strings.TrimSpace(v)
}

// canonicalOrigin returns scheme://host with host lower-cased and a
// default port dropped, or false when host is not a DNS name, IPv4
// address or bracketed IPv6 address with an optional port.
func canonicalOrigin(scheme, host string) (string, bool) {
	name, port, ok := splitHost(host)
	if !ok {
		return "", false
	}
	out := scheme + "://" + strings.ToLower(name)
	if port != "" && !(scheme == "https" && port == "443") && !(scheme == "http" && port == "80") {
		out += ":" + port
	}
	return out, true
}

// splitHost splits a Host value into its name (an IPv6 address keeps its
// brackets) and port ("" when none), checking both strictly: a name of
// letters, digits, '-', '.' and '_'; a port of 1 to 5 digits.
func splitHost(host string) (name, port string, ok bool) {
	if host == "" || len(host) > 260 {
		return "", "", false
	}
	if host[0] == '[' {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", "", false
		}
		name, rest := host[:end+1], host[end+1:]
		if !strings.Contains(name, ":") || net.ParseIP(name[1:end]) == nil {
			return "", "", false
		}
		if rest != "" {
			if rest[0] != ':' {
				return "", "", false
			}
			port = rest[1:]
			if !validPort(port) {
				return "", "", false
			}
		}
		return name, port, true
	}
	name, port, hasPort := strings.Cut(host, ":")
	if hasPort && !validPort(port) || name == "" || len(name) > 253 {
		return "", "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return "", "", false
		}
	}
	return name, port, true
}

func validPort(p string) bool {
	return len(p) >= 1 && len(p) <= 5 && strings.Trim(p, "0123456789") == ""
}

// parsePublicURL splits Config.PublicURL into its canonical origin and
// its path (without a trailing '/'; "" for none): a gateway behind a
// proxy that serves it under a prefix has its resources under that path,
// and their metadata at the well-known path inserted before it.
func parsePublicURL(s string) (origin, path string, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", "", errors.New("not an http(s) URL of scheme, host and optional path")
	}
	origin, ok := canonicalOrigin(scheme, u.Host)
	if !ok {
		return "", "", errors.New("its host is not a valid host name")
	}
	return origin, strings.TrimRight(u.EscapedPath(), "/"), nil
}
