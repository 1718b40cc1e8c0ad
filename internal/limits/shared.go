package limits

import (
	"context"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// This file is the contract with a store the limits of all replicas share
// (internal/cluster implements it on Redis; this package does not know
// it). With a Shared store set, a principal's request rate, tool rates,
// requests in flight and sessions are counted once for the whole cluster;
// while the store fails, each replica falls back to its own buckets with
// every limit divided by the number of live replicas.

// Shared is a store the limits of all replicas share. Its calls are bounded
// by the store's own timeout and fail at once while it is known to be down.
type Shared interface {
	// Admit takes one token from each of req's rates and, when
	// req.MaxInFlight > 0, one of the principal's in-flight slots: all of
	// them or none, in one round trip.
	Admit(ctx context.Context, req SharedRequest) (SharedVerdict, error)
	// AdmitSession gives back ended of the principal's sessions (ones
	// this replica saw end), then takes one if fewer than max are left.
	AdmitSession(ctx context.Context, principal string, max, ended int) (bool, error)
	// Release gives back n in-flight slots (Slot) or sessions (Session)
	// of principal. It does not block: the caller is on a reply's path.
	Release(principal string, kind Counted, n int)
	// Live is the number of live replicas (at least 1): a replica's share
	// of a limit is the limit divided by it.
	Live() int
}

// Counted is what Shared.Release gives back.
type Counted int

// What Shared counts per principal.
const (
	Slot    Counted = iota // a request in flight
	Session                // a live session
)

// Rate is one token bucket: Name is unique per principal ("" for the
// principal's request rate, "tool\x00"+name for a tool's).
type Rate struct {
	Name      string
	PerSecond float64
	Burst     int
}

// SharedRequest is what one POST takes from the shared store.
type SharedRequest struct {
	Principal string
	// Now is the limiter's clock, the only clock the buckets go by, so
	// that replicas agree on time only as far as their clocks do.
	Now         time.Time
	Rates       []Rate
	MaxInFlight int // 0: the POST holds no slot
}

// SharedVerdict is the store's answer: Refused is -1 when admitted, the
// index of the rate that refused, or len(Rates) for the in-flight limit;
// Retry is when the refused rate would admit.
type SharedVerdict struct {
	Refused int
	Retry   time.Duration
}

// admitShared checks the limits of principal key in the Shared store: no
// round trip when the POST takes nothing there, one otherwise. err: the
// store failed, and the caller falls back to this replica's buckets.
func (l *Limiter) admitShared(key string, tools []string, requests bool, now time.Time) (release func(), ref *Refusal, err error) {
	req := SharedRequest{Principal: key, Now: now}
	if l.cfg.RequestsPerSecond > 0 {
		req.Rates = append(req.Rates, Rate{PerSecond: l.cfg.RequestsPerSecond, Burst: burstFor(l.cfg.RequestsPerSecond, l.cfg.Burst)})
	}
	for _, name := range tools {
		req.Rates = append(req.Rates, Rate{Name: toolRate + name, PerSecond: l.cfg.ToolsPerSecond, Burst: toolBurst(l.cfg)})
	}
	if requests && l.cfg.MaxInFlight > 0 {
		req.MaxInFlight = l.cfg.MaxInFlight
	}
	if len(req.Rates) == 0 && req.MaxInFlight == 0 {
		return NoRelease, nil, nil
	}
	v, err := l.cfg.Shared.Admit(context.Background(), req)
	switch {
	case err != nil:
		return nil, nil, err
	case v.Refused >= len(req.Rates):
		return nil, inFlightRefusal(l.cfg.MaxInFlight), nil
	case v.Refused >= 0:
		retry := max(v.Retry, time.Millisecond)
		if name := req.Rates[v.Refused].Name; name != "" {
			return nil, toolRefusal(strings.TrimPrefix(name, toolRate), retry), nil
		}
		return nil, rateRefusal(retry), nil
	}
	if req.MaxInFlight == 0 {
		return NoRelease, nil, nil
	}
	shared := l.cfg.Shared
	return func() { shared.Release(key, Slot, 1) }, nil, nil
}

// Sweep gives back to the Shared store the sessions of every principal
// that ended on this replica. AdmitSession does it for its principal; the
// gateway calls Sweep now and then (each heartbeat) so that a principal
// that opens its next session on another replica is not refused for
// sessions that ended here.
func (l *Limiter) Sweep() {
	if l == nil || l.cfg.Shared == nil || l.cfg.MaxSessions <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, ps := range l.principals {
		l.giveBackEnded(key, ps)
	}
}

// giveBackEnded releases ps's ended sessions in the Shared store. mu is
// held; Release does not block.
func (l *Limiter) giveBackEnded(key string, ps *principalState) {
	if ps.ended > 0 && l.cfg.Shared != nil {
		l.cfg.Shared.Release(key, Session, ps.ended)
		ps.ended = 0
	}
}

// shareOf is this replica's share of limit with share replicas live: at
// least 1, so that a replica still admits something.
func shareOf(limit, share int) int {
	return max(1, limit/max(share, 1))
}

// fit sets lim to this replica's share of perSecond and burst.
func fit(lim *rate.Limiter, perSecond float64, burst, share int, now time.Time) {
	want := rate.Limit(perSecond / float64(max(share, 1)))
	if lim.Limit() != want {
		lim.SetLimitAt(now, want)
	}
	if b := shareOf(burst, share); lim.Burst() != b {
		lim.SetBurstAt(now, b)
	}
}

func toolBurst(cfg Config) int {
	if cfg.ToolBurst > 0 {
		return cfg.ToolBurst
	}
	return burstFor(cfg.ToolsPerSecond, 0)
}

// toolRate starts the Rate.Name of a tool's bucket.
const toolRate = "tool\x00"

func rateRefusal(retry time.Duration) *Refusal {
	return &Refusal{Msg: "request rate limit exceeded", Retry: retry}
}

func toolRefusal(tool string, retry time.Duration) *Refusal {
	return &Refusal{Msg: "rate limit exceeded for tool " + strconv.Quote(tool), Retry: retry}
}

func inFlightRefusal(limit int) *Refusal {
	return &Refusal{Msg: "too many requests in flight (limit " + strconv.Itoa(limit) + ")", Retry: time.Second}
}

func sessionsRefusal(limit int) *Refusal {
	return &Refusal{Msg: "too many sessions (limit " + strconv.Itoa(limit) + "); delete one (DELETE with its Mcp-Session-Id) or let one expire", Retry: 5 * time.Second}
}
