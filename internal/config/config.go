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

// Default returns a Config with no servers and every gateway setting at its
// default (see [Defaults]). `mcpgate serve -- COMMAND` starts from it.
func Default() *Config {
	return &Config{Gateway: Defaults(), Servers: map[string]*Server{}}
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

	// MaxLineBytes is the default, for servers that set no "maxLineBytes",
	// of the longest JSON-RPC message line read from a stdio server, in
	// bytes (key "maxLineBytes"). Default 16777216 (16 MiB).
	MaxLineBytes int

	// LogLevel is the least severe level logged: "debug", "info", "warn" or
	// "error" (key "logLevel"). Default "info".
	LogLevel string

	// HostRouting routes requests by subdomain (key "hostRouting"). Default:
	// off.
	HostRouting HostRouting

	// TrustProxyHeaders makes the gateway honour X-Forwarded-Host and
	// X-Forwarded-Proto (key "trustProxyHeaders"): for host routing and in
	// the legacy SSE endpoint URL. Enable it only behind a proxy that sets
	// them. Default false.
	TrustProxyHeaders bool
}

// HostRouting is the "gateway.hostRouting" block.
type HostRouting struct {
	// Domain (key "domain"): with "mcp.example.com", a request for host
	// "memory.mcp.example.com" on /mcp, /sse or /messages goes to server
	// "memory". Default "" (off).
	Domain string
}

// Defaults returns the gateway block with every setting at its default.
func Defaults() Gateway {
	return Gateway{
		Listen:               "127.0.0.1:8080",
		AllowedOrigins:       defaultOrigins(),
		SessionIdleTimeout:   30 * time.Minute,
		SessionSweepInterval: 30 * time.Second,
		KeepAliveInterval:    15 * time.Second,
		DrainTimeout:         10 * time.Second,
		RequestTimeout:       5 * time.Minute,
		MaxSessions:          10000,
		MaxBodyBytes:         4 << 20,
		SSEReplayEvents:      512,
		MaxLineBytes:         16 << 20,
		LogLevel:             "info",
	}
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

// Isolation says how client sessions share a server's process.
type Isolation string

const (
	// IsolationShared runs one process for all sessions (the default).
	IsolationShared Isolation = "shared"
	// IsolationSession runs one process per client session.
	IsolationSession Isolation = "session"
)

// Server types, the values of Server.Type.
const (
	// TypeStdio is a local child process speaking JSON-RPC on stdin/stdout.
	TypeStdio = "stdio"
	// TypeHTTP is a remote Streamable HTTP server.
	TypeHTTP = "http"
	// TypeSSE is a remote legacy HTTP+SSE server.
	TypeSSE = "sse"
)

// Root is one filesystem root answered to a server's roots/list request.
type Root struct {
	// URI is a file:// URI (key "uri"), required.
	URI string `json:"uri"`
	// Name is a human-readable label (key "name"), optional.
	Name string `json:"name,omitempty"`
}

// Server is one entry of "mcpServers". Command, Args, Env and Type (and URL
// and Headers for remote servers) are the keys Claude Desktop and Claude
// Code write; the rest are mcpgate's own.
type Server struct {
	// Name is the entry's key in "mcpServers"; it appears in URLs
	// (/servers/NAME/...) and must match [A-Za-z0-9._-]+.
	Name string

	// Type is "stdio", "http" or "sse" (key "type"). Default "stdio", or
	// "http" for an entry with a url and no command. Only stdio servers are
	// supported in this release.
	Type string

	// Command is the program to run (key "command"), required for stdio.
	// It is looked up in PATH when it has no slash.
	Command string

	// Args are the program's arguments (key "args"). Default none.
	Args []string

	// Env holds variables added to the gateway's environment for the
	// process (key "env"). Default none.
	Env map[string]string

	// Cwd is the process's working directory (key "cwd"). Default: the
	// gateway's working directory.
	Cwd string

	// URL is a remote server's endpoint (key "url"), for http and sse.
	URL string

	// Headers are added to every request to a remote server (key
	// "headers"), for http and sse.
	Headers map[string]string

	// Isolation is "shared" or "session" (key "isolation"). Default
	// "shared".
	Isolation Isolation

	// Timeout bounds each request to the server (key "timeout"); a request
	// still unanswered then gets a JSON-RPC error. Default: the gateway's
	// requestTimeout ("5m").
	Timeout time.Duration

	// MaxInFlight is the most requests outstanding at the server at once
	// (key "maxInFlight"); more wait their turn. Default 0, unlimited.
	MaxInFlight int

	// Prewarm is how many processes to keep started ahead of new sessions
	// (key "prewarm"). Only valid with isolation "session". Default 0.
	Prewarm int

	// Roots are answered to the server's roots/list requests when no client
	// session can be held responsible for them (key "roots"). Default none.
	Roots []Root

	// MaxLineBytes is the longest JSON-RPC message line read from the
	// server, in bytes (key "maxLineBytes"); a longer line fails the
	// request it answers. Default: the gateway's maxLineBytes (16 MiB).
	MaxLineBytes int
}

// NewServer returns a stdio server entry named name with every field at its
// default, inheriting Timeout and MaxLineBytes from g. The caller sets
// Command (and whatever else) and adds it to Config.Servers.
func (g *Gateway) NewServer(name string) *Server {
	return &Server{
		Name:         name,
		Type:         TypeStdio,
		Isolation:    IsolationShared,
		Timeout:      g.RequestTimeout,
		MaxLineBytes: g.MaxLineBytes,
	}
}

// remote reports whether s is reached over the network rather than run.
func (s *Server) remote() bool {
	return s.Type == TypeHTTP || s.Type == TypeSSE
}
