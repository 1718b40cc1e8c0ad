package gateway

import (
	"net"
	"net/url"
	"strings"
)

// The Host rule. A browser page from a foreign site can reach a gateway on
// this machine through DNS rebinding (its own name resolving to 127.0.0.1):
// the Origin check stops browsers that send Origin, and checking Host stops
// the rest, since such a request carries the attacker's name. So a loopback
// listener accepts only loopback names, plus gateway.allowedHosts, the
// host of gateway.auth.publicUrl and the host-routing domain. A listener on
// another address is meant to be reached by other names, so it accepts
// every Host unless allowedHosts is set.
//
// The public URL's host is accepted because a TLS proxy in front of a
// loopback gateway (Caddy, nginx and Traefik by default) keeps the Host the
// client sent: the name the operator already wrote in publicUrl. Naming it
// a second time in allowedHosts was a step every such deployment missed.

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

// hostCheck returns the front HostAllowed function for a gateway
// listening on listen, or nil when every Host is allowed. publicURL (the
// gateway's public URL, "" for none) adds its host to the names accepted;
// it never restricts a listener that accepts every Host.
func hostCheck(listen string, allowed []string, routingDomain, publicURL string) func(host string) bool {
	if !isLoopbackListen(listen) && len(allowed) == 0 {
		return nil
	}
	names := make(map[string]bool, len(allowed)+1)
	for _, h := range allowed {
		if h == "*" {
			return nil
		}
		names[strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))] = true
	}
	if h := publicHost(publicURL); h != "" {
		names[h] = true
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

// publicHost returns the host name of public URL u (lower case, without
// port or brackets), or "" when u is empty or not a URL with a host.
func publicHost(u string) string {
	if u == "" {
		return ""
	}
	pu, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(pu.Hostname()), ".")
}
