package authserver

import "net/http"

// STUB (the lead's skeleton): helper "login" replaces this file.

type loginPages struct{ s *Server }

func newLoginPages(s *Server) (*loginPages, error) { return &loginPages{s: s}, nil }

func (l *loginPages) routes(*http.ServeMux) {}

// start is where /authorize sends the user agent once it has stored
// req: the sign-in page (or, for a user already signed in, the consent
// page) of that request.
func (l *loginPages) start(w http.ResponseWriter, r *http.Request, req *AuthRequest) {
	http.Redirect(w, r, "/oauth/login?request="+req.ID, http.StatusSeeOther)
}
