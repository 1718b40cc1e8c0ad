package config

import (
	"fmt"
	"log/slog"
	"sort"
	"time"
)

// Config is a whole mcpgate configuration: the gateway's own settings and
// the servers it puts behind its endpoint.
type Config struct {
	// Gateway holds the top-level "gateway" block, with defaults applied.
	Gateway Gateway
	// Servers is the "mcpServers" object, keyed by server name. Each
	// Server's Name equals its key.
	Servers map[string]*Server
	// Endpoints is the "gateway.endpoints" object, keyed by endpoint name:
	// endpoints merging several servers. After Parse it holds the default
	// endpoint "all" (every server) unless the file set it to false or
	// defined it; a Config built in code has only the endpoints it sets.
	Endpoints map[string]*Endpoint
	// Disabled holds the entries of "mcpServers" with "disabled": true
	// (as Cline, Roo, Cursor and Windsurf write), keyed by name: checked
	// like the others, never started, shown as disabled in /readyz, the
	// admin API and the status page. A name is in Servers or Disabled,
	// not both.
	Disabled map[string]*Server
	// Notes are what Parse accepted and ignored (other clients' keys with
	// no meaning here, such as "autoApprove"), one per server and key:
	// not problems, for the caller to log.
	Notes []Note

	// BareServer, if set, names the server also served at /mcp, /sse and
	// /messages while there is no default endpoint. Not a file key:
	// `mcpgate serve -- COMMAND` sets it to its one server.
	BareServer string
}

// Names returns the server names in sorted order.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Servers))
	for name := range c.Servers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Gateway is the top-level "gateway" block: settings of the gateway itself.
// Every key is optional; each field's comment gives its key and default,
// and [Defaults] returns them all.
type Gateway struct {
	// Listen is the TCP address the HTTP endpoint listens on, as host:port
	// (key "listen"). Default "127.0.0.1:8080".
	Listen string

	// AllowedOrigins lists the browser origins allowed to call the gateway
	// (key "allowedOrigins"), checked by [Gateway.OriginAllowed]. An entry
	// is "scheme://host" (any port) or "scheme://host:port" (that port
	// only); "*" allows every origin. Default: http and https on localhost,
	// 127.0.0.1 and [::1], any port.
	AllowedOrigins []string

	// SessionIdleTimeout is how long a client session may go without a
	// request before it is closed (key "sessionIdleTimeout"). Default "30m".
	SessionIdleTimeout time.Duration

	// SessionSweepInterval is how often idle sessions are looked for (key
	// "sessionSweepInterval"). Default "30s".
	SessionSweepInterval time.Duration

	// KeepAliveInterval is how often an idle SSE stream gets a comment line
	// to keep proxies from closing it (key "keepAliveInterval"). Default
	// "15s".
	KeepAliveInterval time.Duration

	// DrainTimeout is how long shutdown waits for in-flight requests before
	// closing connections and stopping servers (key "drainTimeout").
	// Default "10s".
	DrainTimeout time.Duration

	// RequestTimeout is the default per-request timeout of servers that set
	// no "timeout" (key "requestTimeout"). Default "5m".
	RequestTimeout time.Duration

	// MaxSessions is the most client sessions open at once, across all
	// servers (key "maxSessions"). Default 10000.
	MaxSessions int

	// MaxBodyBytes is the largest HTTP request body accepted, in bytes (key
	// "maxBodyBytes"). Default 4194304 (4 MiB).
	MaxBodyBytes int64

	// SSEReplayEvents is how many events each SSE stream keeps for replay
	// to a client reconnecting with Last-Event-ID (key "sseReplayEvents");
	// 0 disables replay. Default 512.
	SSEReplayEvents int

	// SSEReplayBytes bounds the bytes each SSE stream keeps for replay (key
	// "sseReplayBytes"); the oldest events are dropped first, never a final
	// reply. Default 4194304 (4 MiB).
	SSEReplayBytes int64

	// SessionReplayBytes bounds the replay bytes of all the streams of one
	// session together (key "sessionReplayBytes"). Default 16777216
	// (16 MiB).
	SessionReplayBytes int64

	// MaxLineBytes is the default, for servers that set no "maxLineBytes",
	// of the longest JSON-RPC message line read from a stdio server, in
	// bytes (key "maxLineBytes"). Default 16777216 (16 MiB).
	MaxLineBytes int

	// LogLevel is the least severe level logged: "debug", "info", "warn" or
	// "error" (key "logLevel"). Default "info".
	LogLevel string

	// LogFormat is how the gateway's log lines are written on stderr:
	// "text" (key=value pairs, slog's TextHandler) or "json" (one JSON
	// object a line, slog's JSONHandler) (key "logFormat"). Default "text".
	LogFormat string

	// HostRouting routes requests by subdomain (key "hostRouting"). Default:
	// off.
	HostRouting HostRouting

	// HeaderTimeout bounds how long a client may take to send a request's
	// headers (key "headerTimeout"). Default "10s".
	HeaderTimeout time.Duration

	// BodyReadTimeout bounds how long a client may take to send a request's
	// body (key "bodyReadTimeout"); a slower upload is refused. Default
	// "30s".
	BodyReadTimeout time.Duration

	// ReplyWait is how long a POST of a 2025-11-25 (or later) client waits
	// for its replies to send them as one JSON body; a slower reply comes
	// on an SSE stream the client can resume (key "replyWait"). Any
	// session gets a stream as soon as a related message (progress, a log
	// message, a server request) comes first. Default "10ms".
	ReplyWait time.Duration

	// InputWait is how long a 2026-07-28 request answered input_required
	// (its server asked the client for sampling, elicitation or roots)
	// waits for the client's retry before it is cancelled upstream (key
	// "inputWait"). Default "2m".
	InputWait time.Duration

	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request before it is closed (key "idleTimeout"). Default "2m".
	IdleTimeout time.Duration

	// MaxConnections is the most client connections open at once (key
	// "maxConnections"). A connection accepted beyond it waits until
	// another closes (the listen backlog holds the rest). Default 4096.
	MaxConnections int

	// AllowedHosts lists extra Host header names accepted (key
	// "allowedHosts"), compared without case and port; "*" accepts any.
	// On a loopback listener only loopback names (localhost, *.localhost,
	// 127.0.0.0/8, ::1) are accepted besides these, which defeats DNS
	// rebinding; on any other listener every Host is accepted unless this
	// is set, and then only loopback names and these. Default [].
	AllowedHosts []string

	// TrustProxyHeaders makes the gateway honour X-Forwarded-Host and
	// X-Forwarded-Proto (key "trustProxyHeaders"): for host routing and in
	// the legacy SSE endpoint URL. Enable it only behind a proxy that sets
	// them. Default false.
	TrustProxyHeaders bool

	// Auth is the "auth" block (key "auth"): the credentials clients must
	// present (OAuth access tokens, API keys). Default nil: none.
	Auth *Auth

	// TLS serves HTTPS on Listen (key "tls", tls.go). Default nil: plain
	// HTTP (behind a TLS proxy, or on loopback).
	TLS *TLS

	// Limits are per-principal limits (key "limits", limits.go). Default
	// nil: none.
	Limits *Limits

	// Audit is the audit log (key "audit", limits.go). Default nil: none.
	Audit *Audit

	// Metrics serves Prometheus metrics at GET /metrics on the listener,
	// without authentication (key "metrics"). Default true.
	Metrics bool

	// Admin is the admin API and status page (key "admin", admin.go).
	// Default nil: off.
	Admin *Admin

	// SecretsFile is a JSON file of per-principal secrets, {"PRINCIPAL":
	// {"SECRET_NAME": "value"}}, that servers' "principalHeaders" read
	// (key "secretsFile"; principal_headers.go). It is read once, at load.
	// Default "": none.
	SecretsFile string
	// Secrets is SecretsFile's content, read by Parse; nil without one.
	Secrets *Secrets

	// SealKeys seal what the gateway gives clients to give back
	// (requestState): several open, the primary seals (key "sealKeys",
	// seal.go). A reload applies them. Default none: a random key, so
	// sealed values do not survive a restart or open on another replica.
	SealKeys []SealKey
	// SealKeyFile is a JSON file of the same array (key "sealKeyFile"),
	// read at load into SealKeys; set it or "sealKeys", not both.
	// Default "": none.
	SealKeyFile string

	// Cluster places this replica among several serving the same
	// sessions (key "cluster", cluster.go). Default nil: one replica.
	Cluster *Cluster
}

// HostRouting is the "gateway.hostRouting" block.
type HostRouting struct {
	// Domain (key "domain"): with "mcp.example.com", a request for host
	// "memory.mcp.example.com" on /mcp, /sse or /messages goes to server
	// "memory". Default "" (off).
	Domain string
}

// Level returns LogLevel as a slog level; an invalid LogLevel (which
// Validate reports) gives slog.LevelInfo.
func (g *Gateway) Level() slog.Level {
	l, err := ParseLogLevel(g.LogLevel)
	if err != nil {
		return slog.LevelInfo
	}
	return l
}

// ParseLogLevel parses one of "debug", "info", "warn" or "error".
func ParseLogLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q is not one of debug, info, warn, error", s)
}

// Log formats (Gateway.LogFormat).
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// CheckLogFormat reports an error unless s is "text" or "json".
func CheckLogFormat(s string) error {
	if s != LogFormatText && s != LogFormatJSON {
		return fmt.Errorf("log format %q is not one of text, json", s)
	}
	return nil
}
