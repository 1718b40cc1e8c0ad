package admission

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzRequestOrigin: whatever Host and proxy headers a client sends, the
// origin the resource URLs are built on is refused or a plain
// scheme://host[:port] (nothing that could leave a quoted header
// parameter or change the URL's meaning), canonical (built again from its
// own parts it is the same), and so is a public URL's.
func FuzzRequestOrigin(f *testing.F) {
	f.Add("localhost:8080", "", "", false)
	f.Add("GW.example.com:443", "a.example:443, b", "HTTPS", true)
	f.Add("[::1]:80", "[fe80::1%25en0]", "http", true)
	f.Add("localhost:1,evil.example", `x", y="z`, "ftp", true)
	f.Add("1.2.3.4", "[1.2.3.4]:1", "https", true)
	f.Fuzz(func(t *testing.T, host, fwdHost, fwdProto string, trust bool) {
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		r.Host = host
		r.Header.Set("X-Forwarded-Host", fwdHost)
		r.Header.Set("X-Forwarded-Proto", fwdProto)
		origin, ok := RequestOrigin(r, trust)
		checkOrigin(t, "request", origin, ok)
		if origin, path, err := ParsePublicURL(fwdProto + "://" + host + "/" + fwdHost); err == nil {
			checkOrigin(t, "public URL", origin, true)
			if u, err := url.Parse(origin + path); err != nil || u.EscapedPath() != path && path != "" || strings.ContainsAny(path, "\"\\ \t\r\n?#") {
				t.Fatalf("public URL path %q of %q", path, origin)
			}
		}
	})
}

func checkOrigin(t *testing.T, what, origin string, ok bool) {
	t.Helper()
	if !ok {
		return
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		t.Fatalf("%s origin %q is not scheme://host[:port] (%v)", what, origin, err)
	}
	if u.Scheme+"://"+u.Host != origin || strings.ToLower(origin) != origin {
		t.Fatalf("%s origin %q is not canonical", what, origin)
	}
	for i := 0; i < len(origin); i++ {
		if c := origin[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"\,;'<>`+"`", c) >= 0 {
			t.Fatalf("%s origin %q has byte %q", what, origin, c)
		}
	}
	if again, ok := canonicalOrigin(u.Scheme, u.Host); !ok || again != origin {
		t.Fatalf("%s origin %q built again is %q %v", what, origin, again, ok)
	}
}
