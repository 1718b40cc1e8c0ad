package limits

import (
	"strconv"
	"sync/atomic"
	"time"
)

// This file is the gateway-wide cap on POSTs being answered at once
// (Config.MaxInFlightTotal). Where the per-principal limits keep a fair
// share, this one keeps the gateway itself alive: past the cap a POST is
// refused with 503, Retry-After and a JSON-RPC error (429 is for a
// principal over its own share; RFC 9110 section 15.6.4 makes 503 the
// status of a server that is temporarily overloaded). It is one atomic
// counter: the hot path takes no lock for it.
//
// Every POST to a target that carries a request counts, of either era and
// of the stateless revision, as one (a batch is one), from when its
// messages are read until it is answered (a POST of notifications or
// responses only is never refused by it: see AdmitRequest): a /mcp POST
// until its response ends; a legacy /messages POST until the replies of
// its requests are on the session's SSE stream, since its 202 comes long
// before.

// overloadRetryMax bounds the Retry-After of an overload refusal.
const overloadRetryMax = 30 * time.Second

// overload is the state of the global cap.
type overload struct {
	max      int64
	inFlight atomic.Int64
	// avg is a moving average of how long admitted POSTs were in flight,
	// in nanoseconds (0: none ended yet). Updates are load-then-store:
	// one lost to a race costs the estimate nothing that matters.
	avg atomic.Int64
}

// admit takes one of the cap's slots, or refuses.
func (o *overload) admit(now func() time.Time) (release func(), ref *Refusal) {
	n := o.inFlight.Add(1)
	if n > o.max {
		o.inFlight.Add(-1)
		return nil, &Refusal{
			Msg:     "the gateway is overloaded: " + strconv.FormatInt(o.max, 10) + " requests are being answered (gateway.limits.maxInFlightTotal); try again later",
			Retry:   o.retryAfter(n - 1),
			Status:  503,
			Outcome: OutcomeOverloaded,
		}
	}
	start := now()
	return func() {
		o.inFlight.Add(-1)
		d := int64(now().Sub(start))
		old := o.avg.Load()
		if old == 0 {
			o.avg.Store(max(d, 1))
			return
		}
		o.avg.Store(max(old+(d-old)/8, 1))
	}, nil
}

// retryAfter is when a refused client should come back, with n POSTs in
// flight: the time until the first of them ends, were their remaining
// times spread evenly over the average time a POST is in flight
// (average/(n+1)), at least 1 s (Retry-After counts whole seconds) and
// at most overloadRetryMax. Short calls give 1 s; a gateway full of
// minute-long tool calls asks for a few seconds, not a hammering.
func (o *overload) retryAfter(n int64) time.Duration {
	avg := time.Duration(o.avg.Load())
	return min(max(avg/time.Duration(n+1), time.Second), overloadRetryMax)
}
