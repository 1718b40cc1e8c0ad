package remote

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// This file holds a Client's configuration: its fields, their defaults and
// their validation.

// Defaults for the zero values of Config fields.
const (
	DefaultConnectTimeout  = 10 * time.Second
	DefaultRequestTimeout  = 30 * time.Second
	DefaultMaxMessageBytes = 16 << 20
)

// Transports accepted in Config.Transport.
const (
	TransportAuto = "auto" // Streamable HTTP, falling back to legacy SSE
	TransportHTTP = "http" // Streamable HTTP
	TransportSSE  = "sse"  // legacy HTTP+SSE (2024-11-05)
)

// Config configures a Client. Only URL is required.
type Config struct {
	Name string // server name, for logs
	URL  string // the MCP endpoint (Streamable HTTP) or the SSE URL (legacy)
	// Transport is TransportHTTP, TransportSSE or TransportAuto. Default
	// TransportAuto: the first initialize is POSTed to URL; if that gets
	// 400, 404 or 405, URL is opened as a legacy SSE stream instead.
	Transport string
	// Headers are added to every request (authorization, typically). They
	// are never logged. The headers the transport itself sets (Accept,
	// Content-Type, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID)
	// cannot be set here.
	Headers map[string]string
	// HTTPClient sends every request. Default: a client of its own with TLS
	// verification, ConnectTimeout for dialling and TLS handshakes,
	// proxies from the environment, and no redirects to another origin.
	// Its Timeout should be zero: streams stay open for as long as the
	// server streams.
	HTTPClient *http.Client
	// ConnectTimeout bounds dialling and the TLS handshake of the default
	// client. Default 10s.
	ConnectTimeout time.Duration
	// RequestTimeout bounds each request until its response headers
	// arrive; a reply streamed over SSE may take longer. Default 30s.
	RequestTimeout time.Duration
	// MaxMessageBytes bounds one JSON body or SSE event (a longer one is
	// not read to its end: its response is closed, and Oversized called).
	// Default 16 MiB.
	MaxMessageBytes int
	// Logger receives connection events, with server=Name. Never message
	// bodies or headers. Default slog.Default().
	Logger *slog.Logger

	// Resume, when set, starts the Client on an upstream Streamable HTTP
	// session that another Client initialized (on another replica of the
	// gateway): messages carry its session id and protocol version, the
	// standalone GET stream opens only while HoldStream says the Client
	// carries it, and no initialize is sent. If
	// the server forgot the session (404), the Client renews it with
	// Resume.Init as it renews one it initialized itself. Transport must be
	// TransportHTTP. See resume.go.
	Resume *Session
	// OnSession, when set, is told each upstream Streamable HTTP session
	// the Client starts: after the server answered the initialize (before
	// that answer reaches the Handler) and after each renewal of an expired
	// session. It runs on a Client goroutine, under no lock but the one
	// that orders its calls, and must not block for long nor call Close.
	OnSession func(Session)
	// KeepSession leaves the upstream session at the server when the
	// Client closes (no DELETE): another Client may still be serving it
	// (a session another replica resumed).
	KeepSession bool
}

// reservedHeaders are set by the transport; Config.Headers may not.
var reservedHeaders = []string{"Accept", "Content-Type", "Content-Length", "Host",
	"Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

// validate applies defaults and returns every problem of cfg, with base the
// parsed URL.
func (cfg *Config) validate() (base *url.URL, err error) {
	var errs []error
	base, perr := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		errs = append(errs, errors.New("URL is empty"))
	case perr != nil:
		errs = append(errs, fmt.Errorf("URL: %w", perr))
	case base.Scheme != "http" && base.Scheme != "https":
		errs = append(errs, fmt.Errorf("URL: scheme %q is not http or https", base.Scheme))
	case base.Host == "":
		errs = append(errs, errors.New("URL has no host"))
	}
	switch cfg.Transport {
	case "":
		cfg.Transport = TransportAuto
	case TransportAuto, TransportHTTP, TransportSSE:
	default:
		errs = append(errs, fmt.Errorf("Transport %q: want %q, %q or %q", cfg.Transport, TransportAuto, TransportHTTP, TransportSSE))
	}
	for name, value := range cfg.Headers {
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !validHeaderName(name):
			errs = append(errs, fmt.Errorf("Headers: invalid header name %q", name))
		case strings.ContainsAny(value, "\r\n\x00"):
			errs = append(errs, fmt.Errorf("Headers[%s]: value contains CR, LF or NUL", name))
		}
		for _, r := range reservedHeaders {
			if canon == r {
				errs = append(errs, fmt.Errorf("Headers: %s is set by the transport", name))
			}
		}
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if r := cfg.Resume; r != nil {
		if cfg.Transport != TransportHTTP {
			errs = append(errs, fmt.Errorf("Resume needs Transport %q, not %q", TransportHTTP, cfg.Transport))
		}
		errs = append(errs, r.validate()...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("remote %s: invalid config: %w", cfg.Name, errors.Join(errs...))
	}
	return base, nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
