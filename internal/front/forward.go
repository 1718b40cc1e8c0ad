package front

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/internal/audit"
)

// This file forwards a request for an owner-bound session to the replica
// that holds it (its owner): one hop, streamed both ways and flushed as it
// comes (an SSE stream passes through event by event), the Host and every
// header kept, so that the owner admits the request as if it had come to
// it: it authenticates the client, checks its limits and writes its audit
// line. The hop carries a token sealed by the key ring (hopHeader), which
// the owner checks and which makes it answer 404 rather than forward
// again.

// dialTimeout bounds connecting to an owner: a replica that is gone
// (killed, its pod deleted) must cost its clients a 404 at once, not a
// hanging request.
const dialTimeout = time.Second

// forwardStats counts what elsewhere and forward did, for metrics.
type forwardStats struct {
	forwarded   atomic.Uint64 // requests forwarded to their owner
	failed      atomic.Uint64 // forwards whose owner could not be reached: 404
	silent      atomic.Uint64 // forwards whose owner sent no headers in time: 504 (ownerwait.go)
	gone        atomic.Uint64 // requests for a session whose owner had no heartbeat, and whose dial failed: 404
	resumed     atomic.Uint64 // portable sessions resumed here
	storeErrors atomic.Uint64 // handoff records or revocations the store refused
}

// ForwardStats is a snapshot of forwardStats.
type ForwardStats struct {
	Forwarded, Failed, Gone, Resumed, StoreErrors uint64
	// Silent counts the forwards whose owner accepted the request and
	// sent no headers within ownerAnswerWait: answered 504 here.
	Silent uint64
}

// Forwards returns what the Handler did with requests for sessions other
// replicas hold.
func (h *Handler) Forwards() ForwardStats {
	f := &h.forwards
	return ForwardStats{
		Forwarded: f.forwarded.Load(), Failed: f.failed.Load(), Gone: f.gone.Load(),
		Resumed: f.resumed.Load(), StoreErrors: f.storeErrors.Load(), Silent: f.silent.Load(),
	}
}

// newForwarder returns the reverse proxy to owners, and its transport.
func (h *Handler) newForwarder() (*httputil.ReverseProxy, *http.Transport) {
	transport := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // per request where the owner's protocol bounds it (ownerwait.go)
		ForceAttemptHTTP2:     false,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			owner := pr.In.Context().Value(ownerKey{}).(string)
			pr.Out.URL = &url.URL{Scheme: "http", Host: owner, Path: pr.In.URL.Path, RawPath: pr.In.URL.RawPath, RawQuery: pr.In.URL.RawQuery}
			pr.Out.Host = pr.In.Host // the public Host: the owner checks it as the first replica did
			pr.Out.Header.Set(hopHeader, h.cfg.Seal.Seal(hopPurpose, nil, hopTTL))
			// Rewrite (unlike Director) drops X-Forwarded-*; keep what the
			// client's proxy set, so the owner sees the request as it came.
			for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v, ok := pr.In.Header[k]; ok {
					pr.Out.Header[k] = v
				}
			}
		},
		// Counted before the answer is copied, so that whoever reads the
		// answer reads the count with it (metrics, tests).
		ModifyResponse: func(resp *http.Response) error {
			if !headersCame(resp) { // ownerwait.go
				return errOwnerSilent // too late: the client is answered 504 (nothing was written)
			}
			h.forwards.forwarded.Add(1)
			return nil
		},
		Transport:     transport,
		FlushInterval: -1, // SSE: every write reaches the client as it comes
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			*r.Context().Value(forwardErrKey{}).(*error) = err
		},
	}, transport
}

type (
	ownerKey      struct{}
	forwardErrKey struct{}
)

// forward proxies r to the owner at advertise, and reports whether r was
// answered: by the owner, or here with a 504 when the owner took it and
// began no answer in time (ownerwait.go). When the owner cannot be
// reached, nothing was written and the caller answers 404: the owner is
// gone, and so is the session.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, advertise string) bool {
	return h.forwardAs(w, r, advertise, false)
}

// forwardToOwner is forward to replica instance, at advertise, even when
// its heartbeats say it is gone: a replica that misses three beats may be
// dead, or only starved of CPU (a loaded node, a throttled pod, a long
// pause), and only the dial tells them apart. Answered 404 (or its answer
// to a server request, or its parked request, given up) on the
// heartbeats alone, a session, an answer or a retry that its owner still
// holds would be lost for good. A dead owner refuses the dial at once (an
// address nobody answers at fails it within the dial timeout, 1 s), so
// its clients still learn soon; that failure is counted as gone, not as
// a failed forward, and not logged: the heartbeats said so already.
func (h *Handler) forwardToOwner(w http.ResponseWriter, r *http.Request, instance, advertise string) bool {
	alive, known := h.cfg.Cluster.Alive(instance)
	return h.forwardAs(w, r, advertise, known && !alive)
}

// forwardAs is forward; gone: the heartbeats say the owner is gone.
func (h *Handler) forwardAs(w http.ResponseWriter, r *http.Request, advertise string, gone bool) bool {
	var failed error
	ctx := context.WithValue(context.WithValue(r.Context(), ownerKey{}, advertise), forwardErrKey{}, &failed)
	if isStandaloneGET(r) {
		// A standalone stream passing through ends when this replica
		// drains, as its own do: its client opens it again, on a replica
		// that stays, and the drain is not held up by it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-h.drain:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	fctx, clock, stop := h.startOwnerClock(ctx, r) // ownerwait.go
	defer stop()
	fr := r.WithContext(fctx)
	if clock != nil && clock.body != nil {
		fr.Body = clock.body
	}
	h.forwarder.ServeHTTP(w, fr)
	if failed == nil {
		// The owner answered: it read the request's messages and writes
		// its audit line; a line here too would log one request twice.
		if x, ok := w.(*audit.Exchange); ok {
			x.Skip()
		}
		return true // counted as the owner's answer began (ModifyResponse)
	}
	if errors.Is(failed, context.Canceled) && r.Context().Err() != nil {
		return true // the client left: nobody to answer (audited here, as the owner may not have had it)
	}
	if clock != nil && clock.expired() {
		// The owner lives (it took the request) but is wedged: the client
		// is answered here, once, and audited here (the owner may never
		// write its line). Not 404: the session may well live on.
		h.forwards.silent.Add(1)
		if ok, held := h.openFailures.Allow(time.Now()); ok {
			h.log.Warn("the replica holding a session took a forwarded request and sent no answer in time; answered 504", "owner", advertise, "wait", clock.wait, "suppressed", held)
		}
		clock.answerSilent(w)
		return true
	}
	if gone {
		h.forwards.gone.Add(1)
		return false
	}
	h.forwards.failed.Add(1)
	if ok, held := h.openFailures.Allow(time.Now()); ok {
		h.log.Warn("forwarding a request to the replica holding its session or stream failed: it is gone", "owner", advertise, "err", failed, "suppressed", held)
	}
	return false
}
