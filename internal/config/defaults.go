package config

import "time"

// The defaults of a Config built in code: the gateway block's (Defaults),
// an empty Config's (Default) and a new server entry's (NewServer).

// Default returns a Config with no servers, no endpoints and every gateway
// setting at its default (see [Defaults]). `mcpgate serve -- COMMAND` starts from it.
func Default() *Config {
	return &Config{Gateway: Defaults(), Servers: map[string]*Server{}, Endpoints: map[string]*Endpoint{}, Disabled: map[string]*Server{}}
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

// Per-server defaults of the keys that have no gateway-wide setting.
const (
	DefaultInitTimeout  = 120 * time.Second
	DefaultStdinTimeout = 30 * time.Second
	DefaultMaxProcesses = 64
	// MaxPoolProcesses bounds a shared server's "processes": more would
	// only share the same cores, each holding its own memory.
	MaxPoolProcesses         = 64
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
		Processes:         1,
		StderrBytesPerSec: DefaultStderrBytesPerSec,
		StderrLevel:       "info",
		Protocol:          ProtocolAuto,
	}
}
