package authserver

import (
	"net/http"
	"net/url"
	"testing"
)

// Attacks on the token endpoint by a client that reads the code.

// TestRefusedRefreshKeepsItsToken: a refresh asking for a wider scope or
// another resource is refused before the token rotates, so the client
// keeps its refresh token and its grant; a stray or hostile parameter
// costs the user nothing.
func TestRefusedRefreshKeepsItsToken(t *testing.T) {
	w := newWorld(t, nil, nil, nil)
	access, r := w.tokens()
	for _, tc := range []struct {
		name  string
		extra url.Values
		want  string
	}{
		{"wider scope", url.Values{"scope": {"mcp admin"}}, "invalid_scope"},
		{"other resource", url.Values{"resource": {filesURL}}, "invalid_target"},
		{"two resources", url.Values{"resource": {memoryURL, filesURL}}, "invalid_target"},
	} {
		if status, body := w.refresh(r, tc.extra); status != http.StatusBadRequest || body["error"] != tc.want {
			t.Fatalf("%s: %d %v, want %s", tc.name, status, body, tc.want)
		}
	}
	status, body := w.refresh(r, nil)
	if status != http.StatusOK {
		t.Fatalf("the refresh token after refused refreshes: %d %v, want it still good", status, body)
	}
	w.wantAccepted(access, memoryURL)
	w.wantAccepted(body["access_token"].(string), memoryURL)
}
