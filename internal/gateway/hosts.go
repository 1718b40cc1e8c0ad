package gateway

import (
	"net"
	"strings"
)

// The Host rule. A browser page from a foreign site can reach a gateway on
// this machine through DNS rebinding (its own name resolving to 127.0.0.1):
// the Origin check stops browsers that send Origin, and checking Host stops
// the rest, since such a request carries the attacker's name. So a loopback
// listener accepts only loopback names, plus gateway.allowedHosts and the
// host-routing domain. A listener on another address is meant to be
// reached by other names, so it accepts every Host unless allowedHosts is
// set.

// isLoopbackListen reports whether the listen address (host:port) accepts
// only local connections: localhost or a loopback IP. An empty host (every
// interface) is not loopback.
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isLoopbackName reports whether host (lower case, without port) names this
// machine: localhost or any name under .localhost (RFC 6761 reserves them
// for loopback, and browsers never send them to DNS), 127.0.0.0/8 or ::1.
func isLoopbackName(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostCheck returns the httpapi HostAllowed function for a gateway
// listening on listen, or nil when every Host is allowed.
func hostCheck(listen string, allowed []string, routingDomain string) func(host string) bool {
	if !isLoopbackListen(listen) && len(allowed) == 0 {
		return nil
	}
	names := make(map[string]bool, len(allowed))
	for _, h := range allowed {
		if h == "*" {
			return nil
		}
		names[strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))] = true
	}
	domain := strings.ToLower(routingDomain)
	return func(host string) bool {
		host = strings.TrimSuffix(host, ".") // "localhost." is the same name
		if isLoopbackName(host) || names[strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")] {
			return true
		}
		// Subdomain routing serves NAME.domain: those names are meant to
		// be used, on any listener.
		return domain != "" && (host == domain || strings.HasSuffix(host, "."+domain))
	}
}
