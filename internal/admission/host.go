package admission

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// CheckHost serves next only the requests whose Host allowed admits (nil:
// every Host); others get 403, before anything is revealed: a
// DNS-rebinding page reaches a loopback listener under its own name. It
// guards every URL the front serves, not only the targets'.
func CheckHost(allowed func(host string) bool, next http.Handler) http.Handler {
	if allowed == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host := RequestHost(r.Host); !allowed(host) {
			WriteError(w, http.StatusForbidden, protocol.CodeInvalidRequest, "mcpgate: host "+strconv.Quote(host)+
				" is not allowed: list it in gateway.allowedHosts, or set gateway.auth.publicUrl to the URL clients use (https://"+host+")")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequestHost returns the host a request names, as CheckHost's allowed
// sees it: lower-cased, without port or IPv6 brackets.
func RequestHost(hostport string) string {
	host := hostport
	if h, port, err := net.SplitHostPort(hostport); err == nil {
		// net/http admits ',' and '!' in Host: "localhost:1,evil.example"
		// must not pass for localhost. A port is digits only; otherwise the
		// whole value is the name (and matches no allowed host).
		if strings.Trim(port, "0123456789") == "" {
			host = h
		}
	} else if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return strings.ToLower(host)
}
