package auth

import (
	"net/url"
	"strings"
)

// canonicalResource returns a resource URL (or an audience that is one)
// in the form two spellings of the same resource share: scheme and host
// in lower case, no default port, no trailing '/' (MCP clients should
// send none, and some do). Anything that is not an absolute http(s) URL
// is returned as it is, to be compared exactly.
func canonicalResource(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" || u.User != nil || u.Fragment != "" {
		return s
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return s
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); scheme == "https" && p == "443" || scheme == "http" && p == "80" {
		host = strings.TrimSuffix(host, ":"+p)
	}
	out := scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
	if u.RawQuery != "" || u.ForceQuery {
		out += "?" + u.RawQuery
	}
	return out
}

// audienceFits reports whether one of a token's audiences names target
// resource or one of its aliases, or is one of the issuer's extra
// audiences (already canonical).
func audienceFits(aud []string, resource string, aliases, extra []string) bool {
	want := canonicalResource(resource)
	for _, a := range aud {
		c := canonicalResource(a)
		if resource != "" && c == want {
			return true
		}
		for _, alias := range aliases {
			if alias != "" && c == canonicalResource(alias) {
				return true
			}
		}
		for _, e := range extra {
			if c == e {
				return true
			}
		}
	}
	return false
}
