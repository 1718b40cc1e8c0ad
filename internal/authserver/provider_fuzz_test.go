package authserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAuthorize: whatever the query, /authorize never sends the user
// agent anywhere but a registered redirect URI of the client (or the
// sign-in page), and never hands out a code.
func FuzzAuthorize(f *testing.F) {
	for _, seed := range []string{
		authorizeParams().Encode(),
		"client_id=app&redirect_uri=https%3A%2F%2Fevil.example%2Fcb",
		"client_id=app&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcallback&response_type=code",
		"client_id=app&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcallback%2F..%2F&response_type=code",
		"client_id=app&client_id=conf&redirect_uri=" + appRedir,
		"client_id=app&resource=%zz",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, query string) {
		w := newWorld(t, nil, nil, nil)
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, issuer+"/oauth/authorize", nil)
		r.URL.RawQuery = query
		w.s.Handler().ServeHTTP(rec, r)
		loc := rec.Header().Get("Location")
		switch {
		case rec.Code == http.StatusBadRequest && loc == "":
		case rec.Code == http.StatusSeeOther && strings.HasPrefix(loc, "/oauth/login?request="):
		case rec.Code == http.StatusSeeOther && (strings.HasPrefix(loc, appRedir+"?") || strings.HasPrefix(loc, "http://127.0.0.1:")):
			if strings.Contains(loc, "code=") {
				t.Fatalf("a code before consent: %s", loc)
			}
			if strings.HasPrefix(loc, "http://127.0.0.1:") && !strings.Contains(strings.SplitN(loc, "?", 2)[0], "/callback") {
				t.Fatalf("loopback redirect to another path: %s", loc)
			}
		default:
			t.Fatalf("query %q: %d to %q", query, rec.Code, loc)
		}
	})
}

// FuzzVerifyAccess: no string but a token the server signed passes as
// one of its access tokens (what /revoke trusts), and none panics.
func FuzzVerifyAccess(f *testing.F) {
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJFZERTQSIsImtpZCI6InNlZWQifQ.e30.AAAA")
	f.Add("eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2d3LmV4YW1wbGUuY29tIn0.")
	s, err := New(testConfig(), Deps{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if c, ok := s.provider.verifyAccess(raw); ok {
			t.Fatalf("%q verified: %+v", raw, c)
		}
	})
}
