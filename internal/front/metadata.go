package front

import (
	"net/http"
	"strings"

	"github.com/mcpgate/mcpgate/internal/admission"
	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file serves the targets' RFC 9728 metadata documents, and names
// the protected resource of a request's target for authentication
// (admission.Authenticate, wired in admission.go).
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
//
// The TypeScript SDK's SSE client (Claude Code's and mcp-remote's SSE
// transport, the Inspector's) refuses a metadata document whose resource is
// neither the URL it connects to nor a parent of it: given the /mcp URL's
// document for its /sse URL it fails before it asks for a token. So a
// request on /sse or /messages is told the document of the /sse URL, whose
// resource is that URL, and a token whose audience names the /sse URL is
// good for the whole target, as one for its /mcp URL is (Target.Aliases).

// wellKnownPRM is the well-known path of RFC 9728 metadata documents.
const wellKnownPRM = "/.well-known/oauth-protected-resource"

// authTarget is the protected resource of target key as request r names
// it; false when r's host is not a valid host name.
func (h *Handler) authTarget(r *http.Request, key string) (auth.Target, bool) {
	origin, ok := h.publicOrigin, true
	if origin == "" {
		origin, ok = admission.RequestOrigin(r, h.cfg.TrustProxyHeaders)
	}
	t := auth.Target{Kind: "server", Name: key}
	if name, isEndpoint := strings.CutPrefix(key, endpointKeyPrefix); isEndpoint {
		t.Kind, t.Name = "endpoint", name
	}
	path := h.publicPath + mcpURLPath(r, key)
	sse := h.publicPath + sseURLPath(r, key)
	t.Resource = origin + path
	t.Aliases = []string{origin + sse}
	t.Metadata = origin + wellKnownPRM + path
	if isLegacyPath(r.URL.Path) {
		t.Metadata = origin + wellKnownPRM + sse
	}
	return t, ok
}

// sseURLPath is the path of target key's legacy /sse URL as r reached it.
func sseURLPath(r *http.Request, key string) string {
	return strings.TrimSuffix(mcpURLPath(r, key), "/mcp") + "/sse"
}

// isLegacyPath reports whether path is a target's legacy /sse or /messages
// URL, or the metadata document of an /sse URL.
func isLegacyPath(path string) bool {
	path = strings.TrimSuffix(path, "/")
	return strings.HasSuffix(path, "/sse") || strings.HasSuffix(path, "/messages")
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
	if isLegacyPath(r.URL.Path) { // the document of an /sse URL
		target.Resource = target.Aliases[0]
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
	// The legacy /sse URLs' documents (see above).
	h.route(wellKnownPRM+"/servers/{name}/sse", h.serveMetadata)
	h.route(wellKnownPRM+"/endpoints/{endpoint}/sse", h.serveMetadata)
	h.route(wellKnownPRM+"/sse", h.withDefault(h.serveMetadata))
	// The default endpoint's, path-inserted and at the root (where
	// clients look when they have no resource_metadata URL); a 404 when
	// there is none.
	h.route(wellKnownPRM+"/mcp", h.withDefault(h.serveMetadata))
	h.mux.HandleFunc(wellKnownPRM, h.withDefault(h.serveMetadata))
}

// isMetadataPath reports whether a host-routed request's path is its
// target's metadata document.
func isMetadataPath(path string) bool {
	path = strings.TrimSuffix(path, "/")
	return path == wellKnownPRM || path == wellKnownPRM+"/mcp" || path == wellKnownPRM+"/sse"
}
