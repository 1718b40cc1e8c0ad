package authserver

import "net/http"

// STUB (the lead's skeleton): helper "provider" replaces this file.

type provider struct{ s *Server }

func newProvider(s *Server) (*provider, error) { return &provider{s: s}, nil }

func (p *provider) routes(*http.ServeMux) {}

// finish is called by the consent page once req.User has consented
// (req stored with User, AuthTime and Consented set): it issues the
// authorization code and redirects the user agent to the client (303).
func (p *provider) finish(w http.ResponseWriter, r *http.Request, req *AuthRequest) {
	http.Error(w, "not yet", http.StatusNotImplemented)
}

// refuse sends the user agent back to the client with an OAuth error
// (access_denied when the user denied), and forgets req.
func (p *provider) refuse(w http.ResponseWriter, r *http.Request, req *AuthRequest, code, description string) {
	http.Error(w, "not yet", http.StatusNotImplemented)
}
