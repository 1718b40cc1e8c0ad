// Package servers runs one configured MCP server in its isolation mode and
// opens client sessions on it for the HTTP front.
//
// Shared mode: one supervised stdio process and one multiplexer for every
// session; requests of the stateless revision (2026-07-28) go to a second
// process of the same command when the server speaks that revision itself
// (the "protocol" key; see shared.go), else, translated, to processes
// initialized with the client capabilities they declare (translate.go).
// Session mode: one process and one exclusive multiplexer per
// session, started on the session's initialize (from a pool of prewarmed
// processes when prewarm is set) and stopped when the session ends; requests
// of the stateless revision, which have no session, go to processes of
// their own served as in shared mode (see isolated_stateless.go). Remote
// servers ("http", "sse"): one upstream session and one exclusive
// multiplexer per client session, like session mode; stateless requests go
// straight to an "http" remote that speaks 2026-07-28 (see remote.go).
// The sessions of an "http" remote are portable: handed off to the front's
// sink and resumed by another replica of the gateway (portable.go,
// handoff.go); every other session is bound to the replica that opened it.
//
// A stdio process gets a minimal environment (see [Environ]), never the
// gateway's whole one. A server whose command cannot be started is still
// served: its supervisor retries with backoff and its multiplexer answers
// clients with an error naming the cause; [CheckCommand] lets the caller
// refuse to start for servers marked critical.
//
// A Server owns its processes and multiplexers and stops them all in Close;
// no process outlives it.
package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/mux"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
	"github.com/mcpgate/mcpgate/internal/upstream/stdio"
)

// Server is one configured server, ready to open sessions on.
//
// Every Server answers the same questions about the process that serves
// its sessions, whether or not it has one. A shared server has one (or,
// pinned to 2026-07-28, one process of that revision): its readiness,
// counters, PID and restarts are that process's. A server whose processes
// are per client session (isolation "session") or a remote has none:
// PerSession reports true, and its answers say so explicitly:
//
//   - Ready: (true, "per session"): it is only known to be down when a
//     session's own process or upstream is;
//   - FirstStart: false;
//   - Counters: zero (its processes come and go with the sessions, and
//     counters summed over them would go down);
//   - Info: no PID, restarts or stderr; Processes counts the sessions'
//     processes (or upstream sessions);
//   - Restart and Tools: [ErrNoProcess].
//
// The gateway shows such a server as "per session" on /readyz and in the
// metrics (without counters), and an endpoint does not poll it.
//
// All methods are safe for concurrent use. Only Open, OpenStateless, Tools
// and Close wait on a process; the others answer from what is known now.
type Server interface {
	conn.Backend
	// Pending returns the requests in flight upstream, over all processes.
	Pending() int
	// Close stops every process of the server and waits for them.
	Close()

	// PerSession reports that the server has no process of its own that
	// serves every session (see above). It never changes.
	PerSession() bool
	// Ready reports whether the server is ready and, if not, its state in
	// words: "starting", "backing off: command not found: uvx; retrying
	// in 3s", "failed: ...". An endpoint polls it to hide a member that
	// is down and show it again.
	Ready() (ready bool, state string)
	// FirstStart reports whether the process has never been ready (a
	// first npx -y download): an endpoint waits longer for such a member
	// when a client initializes.
	FirstStart() bool
	// Counters returns the process's counters now, for the gateway's
	// metrics; each only grows.
	Counters() Counters
	// Info returns the server's state as the admin API reports it.
	Info() Info
	// Restart kills the process (its requests in flight get an error
	// naming reason) and lets its supervisor start it again; it never
	// waits.
	Restart(reason string) error
	// Tools returns the names of the process's tools (tools/list, every
	// page), asked through a session of the gateway's own bounded by ctx.
	Tools(ctx context.Context) ([]string, error)
}

// statelessConn is a connection of one stateless request as this package
// makes them; OpenStateless hands it on as a conn.StatelessConn.
type statelessConn interface {
	conn.Conn
	ServerInit(ctx context.Context) ([]byte, error)
	Passthrough() bool
}

// toStateless returns the conn.StatelessConn of c, or err.
func toStateless(c statelessConn, err error) (conn.StatelessConn, error) {
	if err != nil {
		return conn.StatelessConn{}, err
	}
	return conn.NewStatelessConn(c, c.ServerInit, c.Passthrough()), nil
}

// StopGrace is how long stopping a stdio process waits after closing its
// stdin before SIGTERM, and again before SIGKILL: stopping one takes at
// most 2*StopGrace (plus the time the kernel takes), and a Server stops its
// processes in parallel.
const StopGrace = 2 * time.Second

// New starts the server described by cfg: in shared mode its process now,
// in session mode its prewarm pool. A command that cannot be spawned is not
// an error here (it is retried with backoff, and clients get the cause);
// the error is for a config that cannot be served at all.
func New(cfg *config.Server, version string, log *slog.Logger) (Server, error) {
	roots, err := rootsResult(cfg.Roots)
	if err != nil {
		return nil, err
	}
	opts := mux.Options{
		Name: cfg.Name, Timeout: cfg.Timeout, MaxInFlight: cfg.MaxInFlight,
		Roots: roots, Version: version, Logger: log,
		InitTimeout: cfg.InitTimeout, PingInterval: cfg.PingInterval,
	}
	switch {
	case cfg.Type == config.TypeHTTP || cfg.Type == config.TypeSSE:
		// Every client session gets its own upstream session; stateless
		// requests translated for a remote of the session eras get sessions of
		// their own (translate.go).
		sharedOpts := opts
		opts.Exclusive = true
		// Each upstream session carries its principal's headers
		// (credentials.go). An "http" remote's is portable: handed to
		// the front's sink, or resumed from another replica's
		// (portable.go); an "sse" remote's is its event stream's.
		spawn := func(ctx context.Context, resume *remote.Session) (*proc, error) {
			cred, err := credentialFor(ctx, cfg)
			if err != nil {
				return nil, err
			}
			var h handoff
			if cfg.Type == config.TypeHTTP {
				h = handoff{sink: conn.Handoff(ctx), resume: resume, register: conn.OnStateUpdate(ctx), held: conn.OnGeneralHeld(ctx)}
			}
			return startRemote(cfg, cred.headers, opts, log, h)
		}
		iso := newIsolatedFor(cfg, 0, func(ctx context.Context) (*proc, error) { return spawn(ctx, nil) }, log)
		if cfg.Type == config.TypeSSE {
			return iso, nil
		}
		return newRemote(cfg, iso, spawn, sharedOpts, log) // and stateless requests
	case cfg.Isolation == config.IsolationSession:
		statelessOpts := opts // stateless requests' processes are shared ones
		opts.Exclusive = true
		iso := newIsolated(cfg, cfg.MaxProcesses, func() (*proc, error) { return start(cfg, opts, 0, log) }, log)
		return newIsolatedStdio(cfg, iso, statelessOpts, log) // and stateless requests
	}
	return newShared(cfg, opts, log)
}

// proc is one upstream connection (a stdio process or a remote session)
// and the multiplexer in front of it.
type proc struct {
	m  *mux.Mux
	up io.Closer // the stdio process or the remote client
	// st is up when it is a stdio process (nil for a remote): its PID,
	// restarts and stderr are what an administrator sees of it.
	st *stdio.Stdio
	// resumed is the protocol version of the session up carries on with,
	// initialized on another replica (portable.go): its client starts
	// initialized. "" for any other.
	resumed string
	// delivered, for a portable remote session, is its client's
	// Delivered (isolatedConn.Handle waits on it); nil for any other.
	delivered func() <-chan struct{}
	// endUpstream, for a portable remote session, makes its stop end the
	// upstream session at the remote too (the client deleted it); nil for
	// any other.
	endUpstream func()
}

// sharedPipeBytes is the pipe capacity asked for a shared server's one
// process: its large messages cross in a few wakeups. Session mode keeps
// the system default: pipe capacity is charged per pipe, and hundreds of
// processes asking for this much would exhaust the user's pipe quota.
const sharedPipeBytes = 1 << 20

// start starts a stdio server (pipeBytes: see upstream.StdioConfig).
func start(cfg *config.Server, opts mux.Options, pipeBytes int, log *slog.Logger) (*proc, error) {
	m := mux.New(opts)
	stderrLevel, _ := config.ParseLogLevel(cfg.StderrLevel) // validated; "" (a literal Server) is info
	up, err := stdio.StartStdio(stdio.StdioConfig{
		Name: cfg.Name, Command: cfg.Command, Args: cfg.Args, Env: Environ(cfg, os.LookupEnv), Dir: cfg.Cwd,
		MaxLineBytes: cfg.MaxLineBytes, Restart: true, StopGrace: StopGrace, Logger: log,
		StuckTimeout: cfg.StdinTimeout, StderrBytesPerSec: cfg.StderrBytesPerSec, StderrLevel: stderrLevel,
		PipeBytes: pipeBytes,
	}, m)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
	}
	m.SetUpstream(up)
	return &proc{m: m, up: up, st: up}, nil
}

// startRemote connects to a remote server with headers (cfg.Headers, or a
// principal's: see credentials.go), lazily: the remote client dials on the
// first message, unless h resumes a session.
func startRemote(cfg *config.Server, headers map[string]string, opts mux.Options, log *slog.Logger, h handoff) (*proc, error) {
	if h.portable() {
		opts.FirstID = portableFirstID() // portable.go
	}
	m := mux.New(opts)
	rc := remote.Config{Name: cfg.Name, URL: cfg.URL, Transport: cfg.Type, Headers: headers, Logger: log}
	h.configure(&rc)
	c, err := remote.Start(rc, m)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
	}
	m.SetUpstream(c)
	p := &proc{m: m, up: c}
	if h.resume != nil {
		p.resumed = h.resume.Version
	}
	if h.portable() {
		p.delivered, p.endUpstream = c.Delivered, c.EndSessionOnClose
		h.follow(c) // portable.go
	}
	return p, nil
}

// stop ends the process (as the spec says: stdin, SIGTERM, SIGKILL to the
// group) and then the multiplexer.
func (p *proc) stop() {
	_ = p.up.Close()
	p.m.Close()
}

func rootsResult(roots []config.Root) ([]byte, error) {
	if roots == nil {
		roots = []config.Root{}
	}
	return json.Marshal(struct {
		Roots []config.Root `json:"roots"`
	}{roots})
}

// KillAll sends SIGKILL to the process group of every server process the
// gateway started and has not reaped, without waiting, and returns how
// many it signalled: the last resort of a second shutdown signal, so no
// grandchild outlives a gateway that exits at once.
func KillAll() int { return stdio.KillAll() }
