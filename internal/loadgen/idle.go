package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// IdleOptions configure Idle. Zero values take the defaults given.
type IdleOptions struct {
	URL      string // the MCP endpoint; required
	Sessions int    // sessions opened; default 1000
	// Streams is how many of the sessions also hold their GET stream open
	// (capped at Sessions); default 0.
	Streams int
	// Hold is how long the sessions are held once all are open; 0 holds
	// them until ctx ends.
	Hold time.Duration
	// Version is the protocol version asked for; default "2025-11-25". It
	// must be of a session era: the stateless revision has no sessions to
	// hold (see [Stateless]).
	Version string

	Header   http.Header // extra headers on every request
	Parallel int         // sessions being opened at once; default 32
	// Progress, if set, is called every ProgressInterval (default 1s) from
	// one goroutine, and once more, with Phase "holding", as soon as every
	// session has been tried; calls never overlap.
	Progress         func(IdleProgress)
	ProgressInterval time.Duration
}

// IdleProgress is a snapshot of an idle run.
type IdleProgress struct {
	Phase   string // "opening", "holding" or "closing"
	Elapsed time.Duration
	Opened  int // sessions open
	Failed  int // sessions that failed to open
	Streams int // GET streams open
}

// IdleResult is what an idle run opened.
type IdleResult struct {
	Sessions      int // asked for
	Opened        int // sessions that opened
	Failed        int // sessions that failed to open
	Streams       int // GET streams that opened
	StreamsFailed int // GET streams that failed to open (their session did open)
	FirstError    string
	Held          time.Duration // how long all were held
}

// Idle opens the sessions (the first Streams of them with a GET stream),
// holds them for Hold or until ctx ends, then closes the streams and
// deletes the sessions. It returns an error only for bad options (a
// stateless version among them): failures to open are counted in the
// result.
func Idle(ctx context.Context, o IdleOptions) (IdleResult, error) {
	ro := Options{URL: o.URL, Version: o.Version}
	if err := ro.setDefaults(); err != nil {
		return IdleResult{}, err
	}
	if Stateless(ro.Version) {
		return IdleResult{}, fmt.Errorf("loadgen: idle mode holds sessions, and protocol version %s has none", ro.Version)
	}
	if o.Sessions <= 0 {
		o.Sessions = 1000
	}
	o.Streams = min(max(o.Streams, 0), o.Sessions)
	if o.Parallel <= 0 {
		o.Parallel = 32
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = time.Second
	}
	tr := newTransport(o.Parallel + o.Streams)
	defer tr.CloseIdleConnections()
	ep := newEndpoint(&http.Client{Transport: tr}, o.URL, o.Header, ro.Version)

	start := time.Now()
	var opened, failed, streams, streamsFailed atomic.Int64
	var phase atomic.Value
	phase.Store("opening")
	snapshot := func() IdleProgress {
		return IdleProgress{Phase: phase.Load().(string), Elapsed: time.Since(start),
			Opened: int(opened.Load()), Failed: int(failed.Load()), Streams: int(streams.Load())}
	}
	var progressMu sync.Mutex // serialises the reporter's calls and the "holding" one
	progress := func() {
		progressMu.Lock()
		defer progressMu.Unlock()
		o.Progress(snapshot())
	}
	stopReport := every(o.ProgressInterval, o.Progress != nil, progress)
	defer stopReport()

	// Streams live until held ends: their requests use holdCtx.
	holdCtx, endHold := context.WithCancel(context.WithoutCancel(ctx))
	defer endHold()
	sessions := make([]*session, o.Sessions)
	bodies := make([]*http.Response, o.Streams)
	var firstErr atomic.Value
	noteErr := func(err error) { firstErr.CompareAndSwap(nil, err.Error()) }
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(o.Sessions, o.Parallel) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= o.Sessions || ctx.Err() != nil {
					return
				}
				octx, cancel := context.WithTimeout(ctx, 30*time.Second)
				s, err := ep.open(octx)
				cancel()
				if err != nil {
					failed.Add(1)
					noteErr(err)
					continue
				}
				sessions[i] = s
				opened.Add(1)
				if i < o.Streams {
					resp, err := s.openStream(holdCtx)
					if err != nil {
						streamsFailed.Add(1)
						noteErr(err)
						continue
					}
					bodies[i] = resp
					streams.Add(1)
				}
			}
		})
	}
	wg.Wait()

	phase.Store("holding")
	if o.Progress != nil {
		progress()
	}
	held := time.Now()
	if o.Hold > 0 {
		_ = sleep(ctx, o.Hold)
	} else {
		<-ctx.Done()
	}
	res := IdleResult{
		Sessions: o.Sessions, Opened: int(opened.Load()), Failed: int(failed.Load()),
		Streams: int(streams.Load()), StreamsFailed: int(streamsFailed.Load()), Held: time.Since(held),
	}
	if e, ok := firstErr.Load().(string); ok {
		res.FirstError = e
	}

	phase.Store("closing")
	endHold()
	for _, b := range bodies {
		if b != nil {
			_ = b.Body.Close()
		}
	}
	var open []*session
	for _, s := range sessions {
		if s != nil {
			open = append(open, s)
		}
	}
	closeSessions(ep, open)
	return res, nil
}
