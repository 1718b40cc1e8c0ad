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
