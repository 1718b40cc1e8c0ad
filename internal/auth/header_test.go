package auth

import (
	"net/http"
	"strings"
	"testing"
)

func TestBearerToken(t *testing.T) {
	tests := []struct {
		values []string
		token  string
		status tokenStatus
	}{
		{nil, "", tokenNone},
		{[]string{""}, "", tokenNone},
		{[]string{"Bearer abc"}, "abc", tokenOK},
		{[]string{"bearer abc"}, "abc", tokenOK},
		{[]string{"BEARER   a-b.c_d~e+f/g=="}, "a-b.c_d~e+f/g==", tokenOK},
		{[]string{" Bearer abc "}, "abc", tokenOK},
		{[]string{"Bearer"}, "", tokenNone},
		{[]string{"Bearer "}, "", tokenNone},
		{[]string{"Basic YWxhZGRpbjpvcGVuc2VzYW1l"}, "", tokenOtherScheme},
		{[]string{"Bearerabc"}, "", tokenOtherScheme},
		{[]string{"Bearer\tabc"}, "", tokenOtherScheme},
		{[]string{"Bearer a b"}, "", tokenMalformed},
		{[]string{"Bearer =abc"}, "", tokenMalformed},
		{[]string{"Bearer ab=c"}, "", tokenMalformed},
		{[]string{"Bearer ==="}, "", tokenMalformed},
		{[]string{"Bearer ab\"c"}, "", tokenMalformed},
		{[]string{"Bearer é"}, "", tokenMalformed},
		{[]string{"Bearer a", "Bearer b"}, "", tokenMultiple},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.values {
			h.Add("Authorization", v)
		}
		token, status := bearerToken(h)
		if token != tt.token || status != tt.status {
			t.Errorf("%q: %q, %d; want %q, %d", tt.values, token, status, tt.token, tt.status)
		}
	}
}

func TestIsJWT(t *testing.T) {
	for token, want := range map[string]bool{
		"eyJhbGciOiJSUzI1NiJ9.e30.c2ln":     true,  // {"alg":"RS256"}
		"eyJ0eXAiOiJKV1QifQ.e30.c2ln":       false, // {"typ":"JWT"}: no alg
		"abc.def.ghi":                       false,
		"v2.local.payload":                  false,
		"opaque":                            false,
		"eyJhbGciOiJSUzI1NiJ9.e30.c2ln.x.y": false, // five parts: a JWE
		"eyJhbGciOiJSUzI1NiJ9.e30":          false,
	} {
		if got := isJWT(token); got != want {
			t.Errorf("isJWT(%q) = %v", token, got)
		}
	}
}

// FuzzAuthorization puts any Authorization value to a Gate with API keys
// and an issuer: it never panics, answers with a status it documents, a
// challenge that cannot split a header, and never the token in its
// reason; a token is only taken from a well-formed Bearer header.
func FuzzAuthorization(f *testing.F) {
	clk := newClock()
	iss := newFakeIssuer(f, keyA())
	for _, seed := range []string{
		"", "Bearer " + ciKey, "bearer x", "Basic abc", "Bearer a b", "Bearer \x00", "Bearer ====",
		"Bearer " + keyA().sign(f, iss.claims(clk, nil)),
		"Bearer eyJhbGciOiJub25lIn0.e30.", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "Bearer " + strings.Repeat("A", 100),
		"Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6IkEifQ.eyJpc3MiOiJcdTAwMjJcclxuIn0.c2ln",
	} {
		f.Add(seed)
	}
	cfg := oauthConfig(Issuer{Issuer: iss.issuer})
	cfg.APIKeys = []APIKey{{Name: "ci", SHA256: hashOf(ciKey), Servers: []string{"github"}}}
	g, err := New(cfg, Options{Now: clk.Now})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(g.Close)
	f.Fuzz(func(t *testing.T, value string) {
		h := http.Header{"Authorization": {value}}
		token, st := bearerToken(h)
		if st == tokenOK {
			scheme, rest, _ := strings.Cut(strings.Trim(value, " \t"), " ")
			if !strings.EqualFold(scheme, "bearer") || strings.TrimLeft(rest, " ") != token || !isB64Token(token) {
				t.Fatalf("%q: token %q", value, token)
			}
		} else if token != "" {
			t.Fatalf("%q: status %d with token %q", value, st, token)
		}
		r := request("")
		r.Header = h
		d := g.Authenticate(r, memory)
		switch d.Status {
		case 0:
			if d.Principal == nil || st != tokenOK {
				t.Fatalf("%q: %+v", value, d)
			}
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusServiceUnavailable:
			if d.Principal != nil || d.Reason == "" {
				t.Fatalf("%q: %+v", value, d)
			}
		default:
			t.Fatalf("%q: status %d", value, d.Status)
		}
		if strings.ContainsAny(d.Challenge, "\r\n\x00") || d.Challenge != "" && !strings.HasPrefix(d.Challenge, "Bearer") {
			t.Fatalf("%q: challenge %q", value, d.Challenge)
		}
		if len(token) >= 8 && strings.Contains(d.Reason+d.Challenge, token) {
			t.Fatalf("%q: the token is in %q / %q", value, d.Reason, d.Challenge)
		}
	})
}
