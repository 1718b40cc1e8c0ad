package front

import (
	"net/http"
	"strings"
)

// Clients are given URLs by people, who write them with a trailing slash as
// often as without ("https://gw.example.com/mcp/"): a client that gets 404
// for one shows only "failed to connect". Every URL the handler serves is
// therefore also served with one trailing slash, as the same target. The
// {$} anchor keeps the slashed pattern exact: "/servers/{name}/mcp/" alone
// would be a subtree pattern, serving "/servers/x/mcp/anything" too.

// route registers serve at pattern and at pattern with a trailing slash.
func (h *Handler) route(pattern string, serve http.HandlerFunc) {
	h.mux.HandleFunc(pattern, serve)
	h.mux.HandleFunc(pattern+"/{$}", serve)
}

// isMessagesPath reports whether path is a legacy session's /messages URL
// (with or without its trailing slash).
func isMessagesPath(path string) bool {
	return strings.HasSuffix(strings.TrimSuffix(path, "/"), "/messages")
}

// serveSSEURL serves a target's /sse URL. A GET without a session id opens
// a session of the 2024-11-05 HTTP+SSE transport, as the URL was made for;
// anything else (a POST, a DELETE, a GET carrying Mcp-Session-Id) is
// Streamable HTTP, served as on the target's /mcp URL. People paste the
// /sse URL they have into a client set to Streamable HTTP (Claude Code's
// --transport http, an SDK's Streamable HTTP client), which then POSTs its
// initialize there and, refused, fails to connect instead of falling back.
// The /mcp URL serves both transports the same way (a GET without a
// session id there opens a legacy session too).
func (h *Handler) serveSSEURL(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.Header.Get("Mcp-Session-Id") == "" {
		h.admittedSSE.ServeHTTP(w, r)
		return
	}
	h.admittedMCP.ServeHTTP(w, r)
}
