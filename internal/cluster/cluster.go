package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Config is what a Cluster needs; the gateway fills it from the
// configuration's gateway.cluster (this package does not read the
// configuration itself).
type Config struct {
	// Instance names this replica for one process life. Default: the host
	// name and a random suffix, new on every start.
	Instance string
	// Advertise is host:port where the other replicas reach this one.
	Advertise string
	// RedisURL is a redis:// or rediss:// URL; "" runs without Redis: the
	// Cluster knows only itself.
	RedisURL string
	// RedisPassword, if set, overrides the URL's password.
	RedisPassword string
	// Heartbeat is how often this replica announces itself; it counts as
	// gone after 3 missed beats. Default 1s.
	Heartbeat time.Duration
	// Timeout bounds every Redis call. Default 250ms.
	Timeout time.Duration
	// Prefix starts every key and channel name. Default "mcpgate:".
	Prefix string
	// SessionTTL is how long a principal's session count outlives its last
	// session opened (a replica that crashed never gives its sessions
	// back). Default 24h.
	SessionTTL time.Duration
	// InFlightTTL is how long a principal's in-flight count outlives its
	// last admitted request, for the same reason. Default 10m.
	InFlightTTL time.Duration
	// StreamEvents is about how many events Redis keeps of each
	// resumable stream (MAXLEN ~). Default 512.
	StreamEvents int
	// Logger receives the line when Redis goes down and the one when it
	// is back. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of heartbeats, the live view and the limits.
	// Default time.Now.
	Now func() time.Time
}

// ErrUnavailable is returned, at once, by calls made while Redis is known
// to be down (or when there is none); the next heartbeat checks it again.
var ErrUnavailable = errors.New("cluster: redis unavailable")

// releaseQueue bounds the in-flight and session counts waiting to be given
// back. Past it a release is dropped (and counted): the count then
// overstates until its key expires (InFlightTTL, SessionTTL), which is
// better than a goroutine per reply when Redis is slow.
const releaseQueue = 4096

// Cluster is this replica's view of the others and its access to Redis.
// Its methods are safe for concurrent use.
type Cluster struct {
	// Static after New.
	cfg     Config
	rdb     *redis.Client // nil: no Redis
	log     *slog.Logger
	keys    keys
	release chan release
	// streamOps queues the writes of resumable streams (streams.go).
	streamOps chan streamOp
	streams   streamStats

	// health is Redis's state: unknown until the first call, down after
	// a failed call until a heartbeat succeeds; while down, calls other
	// than the heartbeat fail at once.
	health  atomic.Int32
	dropped atomic.Int64 // releases dropped with the queue full

	mu       sync.Mutex // guards the fields below; never held during I/O
	view     map[string]struct{}
	viewAt   time.Time            // when view was read from Redis; zero: never
	seen     map[string]time.Time // every instance a view listed, and its last beat as of then (seenFor)
	upSince  time.Time            // the first of the beats in a row that reached Redis; zero: the last failed
	live     int                  // len(view) at the last successful beat, >= 1
	onRevoke []func(sid string)
}

// New returns the Cluster of cfg. It does not reach Redis; Run does.
func New(cfg Config) (*Cluster, error) {
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.Instance = host + "-" + hex.EncodeToString(b[:])
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 250 * time.Millisecond
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "mcpgate:"
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 24 * time.Hour
	}
	if cfg.InFlightTTL <= 0 {
		cfg.InFlightTTL = 10 * time.Minute
	}
	if cfg.StreamEvents <= 0 {
		cfg.StreamEvents = 512
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cluster{
		cfg:       cfg,
		log:       cfg.Logger,
		keys:      keys{prefix: cfg.Prefix},
		release:   make(chan release, releaseQueue),
		streamOps: make(chan streamOp, streamQueue),
		view:      map[string]struct{}{cfg.Instance: {}},
		live:      1,
	}
	if cfg.RedisURL == "" {
		c.health.Store(healthDown)
		return c, nil
	}
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("cluster: redis url: %w", err)
	}
	if cfg.RedisPassword != "" {
		opt.Password = cfg.RedisPassword
	}
	// Every way a call could wait is bounded by Timeout, and nothing is
	// retried inside the client: a retry would multiply the bound.
	opt.DialTimeout = cfg.Timeout
	opt.ReadTimeout = cfg.Timeout
	opt.WriteTimeout = cfg.Timeout
	opt.PoolTimeout = cfg.Timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	quietRedisLogs()
	c.rdb = redis.NewClient(opt)
	return c, nil
}

// Instance is this replica's id.
func (c *Cluster) Instance() string { return c.cfg.Instance }

// Advertise is this replica's address for the others.
func (c *Cluster) Advertise() string { return c.cfg.Advertise }

// Run announces this replica every heartbeat, keeps the live view, listens
// for revocations, gives back released counts and writes the resumable
// streams, until ctx ends. It
// returns once every goroutine it started has ended. Without Redis it
// waits for ctx.
func (c *Cluster) Run(ctx context.Context) {
	if c.rdb == nil {
		<-ctx.Done()
		return
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		c.subscribe(ctx)
	}()
	go func() {
		defer wg.Done()
		c.streamLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		c.releaseLoop(ctx)
	}()
	_ = c.Beat(ctx)
	tick := time.NewTicker(c.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
			_ = c.Beat(ctx)
		}
	}
}

// Close closes the connections to Redis. Call it after Run has returned.
func (c *Cluster) Close() error {
	if c.rdb == nil {
		return nil
	}
	return c.rdb.Close()
}

// Down reports whether Redis is known to be unavailable (or absent).
func (c *Cluster) Down() bool { return c.health.Load() == healthDown }

// Dropped is how many releases were dropped with the queue full.
func (c *Cluster) Dropped() int64 { return c.dropped.Load() }

// Redis is the client of gateway.cluster's Redis, for the other records
// the gateway keeps there (the authorization server's store); nil without
// one, or on a nil Cluster (one replica). Its calls are bounded as the
// Cluster's own (Timeout for dial, read, write and pool wait, no
// retries), but they do not go through the Cluster's health: their
// callers see Redis's errors themselves. Close closes it.
func (c *Cluster) Redis() redis.UniversalClient {
	if c == nil || c.rdb == nil {
		return nil // not a nil *redis.Client in a non-nil interface
	}
	return c.rdb
}

// Redis health states.
const (
	healthUnknown int32 = iota
	healthUp
	healthDown
)

// call runs fn with a context bounded by Timeout, unless Redis is known to
// be down (then ErrUnavailable at once). A failure marks Redis down.
func (c *Cluster) call(ctx context.Context, fn func(ctx context.Context) error) error {
	if c.rdb == nil || c.health.Load() == healthDown {
		return ErrUnavailable
	}
	return c.try(ctx, fn)
}

// try is call without the down check: the heartbeat's way back up.
func (c *Cluster) try(parent context.Context, fn func(ctx context.Context) error) error {
	if c.rdb == nil {
		return ErrUnavailable
	}
	ctx, cancel := context.WithTimeout(parent, c.cfg.Timeout)
	defer cancel()
	err := fn(ctx)
	if err == nil || errors.Is(err, redis.Nil) {
		c.setHealth(healthUp, nil)
		return err
	}
	if parent.Err() != nil {
		// The caller gave up: that says nothing about Redis.
		return err
	}
	if answered(err) {
		// Redis answered: it is up, the command is wrong.
		return err
	}
	c.setHealth(healthDown, err)
	return err
}

// setHealth records Redis's state, logging each change once (not once per
// call).
func (c *Cluster) setHealth(h int32, err error) {
	if h == healthDown {
		// The views read before the outage may be old, and a Redis that
		// restarted empty lists an instance only once it beat again.
		c.mu.Lock()
		c.upSince = time.Time{}
		c.mu.Unlock()
	}
	old := c.health.Swap(h)
	if old == h {
		return
	}
	switch {
	case h == healthDown:
		c.log.Warn("cluster: redis unreachable; limits fall back to this replica's share", "instance", c.cfg.Instance, "err", err)
	case old == healthDown:
		c.log.Info("cluster: redis reachable again", "instance", c.cfg.Instance)
	}
}

// answered reports an error reply about the command itself (a script's
// error, a wrong type), from a Redis that works. Replies saying the server
// cannot serve (LOADING, READONLY after a failover, MASTERDOWN,
// CLUSTERDOWN, TRYAGAIN, BUSY) count as Redis down, like a failed dial.
func answered(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	switch code {
	case "LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY":
		return false
	}
	return true
}
