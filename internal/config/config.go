package config

import (
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
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

// Default returns a Config with no servers, no endpoints and every gateway
// setting at its default (see [Defaults]). `mcpgate serve -- COMMAND` starts from it.
func Default() *Config {
	return &Config{Gateway: Defaults(), Servers: map[string]*Server{}, Endpoints: map[string]*Endpoint{}, Disabled: map[string]*Server{}}
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
		SSEReplayBytes:       4 << 20,
		SessionReplayBytes:   16 << 20,
		MaxLineBytes:         16 << 20,
		LogLevel:             "info",
		LogFormat:            "text",
		HeaderTimeout:        10 * time.Second,
		BodyReadTimeout:      30 * time.Second,
		ReplyWait:            10 * time.Millisecond,
		InputWait:            2 * time.Minute,
		IdleTimeout:          2 * time.Minute,
		MaxConnections:       4096,
		AllowedHosts:         []string{},
		Metrics:              true,
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

// Protocols, the values of Server.Protocol.
const (
	// ProtocolAuto probes whether the server speaks 2026-07-28.
	ProtocolAuto = "auto"
	// ProtocolModern requires the server to speak 2026-07-28.
	ProtocolModern = protocol.StatelessVersion
	// ProtocolSessions says the server speaks only the session eras
	// (2024-11-05 to 2025-11-25): stateless clients are served by
	// translation only.
	ProtocolSessions = "sessions"
	// ProtocolLegacy is the old name of ProtocolSessions, still accepted.
	// "legacy" now names only the 2024-11-05 HTTP+SSE transport.
	ProtocolLegacy = "legacy"
)

// SessionsOnly reports whether the server's protocol is ProtocolSessions,
// under either of its names.
func (s *Server) SessionsOnly() bool {
	return s.Protocol == ProtocolSessions || s.Protocol == ProtocolLegacy
}

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
	// "http" for an entry with a url and no command.
	Type string

	// Command is the program to run (key "command"), required for stdio.
	// It is looked up in PATH when it has no slash.
	Command string

	// Args are the program's arguments (key "args"). Default none.
	Args []string

	// Env holds variables set for the process (key "env"). A stdio process
	// gets only PATH, HOME, LANG and TMPDIR from the gateway's environment
	// (those that are set), the variables named in InheritEnv, and these,
	// which win. Default none.
	Env map[string]string

	// InheritEnv names more variables of the gateway's environment passed
	// to the process (key "inheritEnv"), for instance a token the server
	// needs. Default none.
	InheritEnv []string

	// Critical makes the gateway refuse to start when this server's command
	// cannot be run (key "critical"). A server that is not critical and
	// cannot start is served anyway: its clients get an error naming the
	// cause while it is retried with backoff. Default false.
	Critical bool

	// Cwd is the process's working directory (key "cwd"). Default: the
	// gateway's working directory.
	Cwd string

	// URL is a remote server's endpoint (key "url"), for http and sse.
	URL string

	// Headers are added to every request to a remote server (key
	// "headers"), for http and sse.
	Headers map[string]string

	// PrincipalHeaders are added to every request to a remote server made
	// for a principal, over Headers (key "principalHeaders", for http and
	// sse): header name -> template of {{principal}}, {{secret.NAME}}
	// (from gateway.secretsFile) and {{claim.NAME}}; a session or request
	// for which one cannot be filled is refused (principal_headers.go).
	// Default none.
	PrincipalHeaders map[string]Template
	// Secrets are what {{secret.NAME}} reads; Parse sets it to
	// Gateway.Secrets.
	Secrets *Secrets

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

	// InitTimeout bounds the initialize handshake of each (re)started
	// process or remote session (key "initTimeout"), apart from the
	// per-request timeout: a slow first "npx -y" download fits in it. A
	// handshake that takes longer is retried with backoff. Default "120s".
	InitTimeout time.Duration

	// PingInterval is how often the gateway pings the server to check that
	// it still answers (key "pingInterval"); a server that stops answering
	// is restarted. "0" turns the probe off, for servers that do not
	// answer ping. Default "0".
	PingInterval time.Duration

	// StdinTimeout bounds one write to a stdio server's stdin (key
	// "stdinTimeout"): a server that stops reading that long is killed and
	// restarted, and its pending requests fail. Default "30s".
	StdinTimeout time.Duration

	// MaxProcesses is the most processes of this server's sessions at once,
	// prewarmed ones included (key "maxProcesses"); only with isolation
	// "session". A session beyond it is refused with 503 and Retry-After.
	// The processes serving stateless requests (see Protocol) are bounded
	// apart, as a shared server's, and not counted. Default 64.
	MaxProcesses int

	// StderrBytesPerSec bounds how many bytes of a stdio server's stderr
	// are logged per second (key "stderrBytesPerSec"); the excess is
	// counted and summarised in one line. Default 65536.
	StderrBytesPerSec int

	// StderrLevel is the level of a stderr line that names none ("debug",
	// "info", "warn" or "error"; key "stderrLevel"): a line that names one
	// ("ERROR: ...", "[warn]", "level=debug", a JSON "level") is logged at
	// its own. Default "info".
	StderrLevel string

	// Prefix goes before the server's tool and prompt names, followed by
	// the endpoint's separator, in every endpoint the server is a member
	// of (key "prefix"): letters, digits, '_', '-' or '.'. "" puts nothing
	// before them (then they must not collide with another member's).
	// Default: the server's name.
	Prefix string

	// Tools, Prompts and Resources select what the server exposes through
	// endpoints (keys "tools", "prompts", "resources"): allow and deny
	// globs over its own tool and prompt names and its resource URIs. A
	// filtered item is not listed and cannot be called. They do not apply
	// at /servers/NAME/mcp, which serves the server as it is. Default:
	// everything.
	Tools, Prompts, Resources Globs

	// Protocol says which protocol era the server speaks (key
	// "protocol"). "auto" finds out: a second process of a stdio server's
	// command is probed with server/discover on the first request of the
	// stateless revision, and serves those natively when it speaks
	// 2026-07-28, else they are translated through the initialized
	// process; a server that refuses the gateway's initialize and answers
	// server/discover speaks 2026-07-28 alone, and its sessions of the
	// older eras take the reverse bridge. "2026-07-28" says the server
	// speaks it: no process is initialized, and sessions of the older eras
	// take the reverse bridge (valid for "http" remotes too). "sessions"
	// (old name "legacy", still accepted) says it speaks only the session
	// eras: the second process never starts (always translation; stdio
	// only).
	// With isolation "session", the stateless requests (and, pinned to
	// 2026-07-28, the sessions) get a shared server's processes of their
	// own. Default "auto".
	Protocol string

	// Auth overrides gateway.auth for this server (key "auth"): false
	// leaves it open, true protects it, {"scopes": [...]} protects it with
	// other scopes. Default nil: gateway.auth.required and
	// gateway.auth.oauth.scopes.
	Auth *TargetAuth

	// Policy decides which principals may list and use which of its
	// tools, prompts and resources (key "policy"; see [Policy]), at
	// /servers/NAME/mcp and in every endpoint merging it. Default nil:
	// everyone may use everything.
	Policy *Policy

	// Disabled keeps the entry out of service (key "disabled", as Cline,
	// Roo, Cursor and Windsurf write): Parse puts it in Config.Disabled
	// instead of Config.Servers. Default false.
	Disabled bool

	// EnvFile is a file of KEY=VALUE lines whose variables are set for
	// the process under Env (key "envFile", as VS Code and Cursor write;
	// relative to the config file's workspace, envfile.go). Parse reads
	// it into Env. Default "": none.
	EnvFile string
}

// Per-server defaults of the keys that have no gateway-wide setting.
const (
	DefaultInitTimeout       = 120 * time.Second
	DefaultStdinTimeout      = 30 * time.Second
	DefaultMaxProcesses      = 64
	DefaultStderrBytesPerSec = 64 << 10
)

// NewServer returns a stdio server entry named name with every field at its
// default, inheriting Timeout and MaxLineBytes from g, and the rest at the
// Default* constants. The caller sets
// Command (and whatever else) and adds it to Config.Servers.
func (g *Gateway) NewServer(name string) *Server {
	return &Server{
		Name:              name,
		Prefix:            name,
		Type:              TypeStdio,
		Isolation:         IsolationShared,
		Timeout:           g.RequestTimeout,
		MaxLineBytes:      g.MaxLineBytes,
		InitTimeout:       DefaultInitTimeout,
		StdinTimeout:      DefaultStdinTimeout,
		MaxProcesses:      DefaultMaxProcesses,
		StderrBytesPerSec: DefaultStderrBytesPerSec,
		StderrLevel:       "info",
		Protocol:          ProtocolAuto,
	}
}

// remote reports whether s is reached over the network rather than run.
func (s *Server) remote() bool {
	return s.Type == TypeHTTP || s.Type == TypeSSE
}
