package config

import (
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// The server entry of "mcpServers" (Server), the values its Type, Protocol
// and Isolation keys take, and the roots (Root) its server is told of.

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

	// Processes is how many processes of the command serve a shared stdio
	// server's sessions (key "processes"), each initialized by the gateway
	// once: a session is pinned to one for its life, placed on the least
	// loaded when it initializes. Only with isolation "shared", at most
	// MaxPoolProcesses. Default 1; 0 (a literal Server) counts as 1.
	Processes int

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

// remote reports whether s is reached over the network rather than run.
func (s *Server) remote() bool {
	return s.Type == TypeHTTP || s.Type == TypeSSE
}
