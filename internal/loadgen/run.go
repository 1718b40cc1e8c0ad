package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure Run. Zero values take the defaults given.
type Options struct {
	URL         string        // the MCP endpoint, e.g. http://127.0.0.1:8080/servers/echo/mcp; required
	Sessions    int           // sessions opened; default 32
	Concurrency int           // callers per session, each with one call in flight; default 1
	Duration    time.Duration // measured, and until one call begun in it ended; default 10s
	Warmup      time.Duration // driven as measured but not recorded; default 0
	// Version is the protocol version asked for in initialize; default
	// "2025-11-25". A version of the stateless revision (see [Stateless])
	// opens no sessions: each "session" is then a client that sends
	// server/discover and makes stateless calls.
	Version string
	Header  http.Header // extra headers on every request
	// Size is the length in bytes of each call's message argument, its
	// unique part first, then ASCII filler; at most MaxSize. Default 0: the
	// unique part alone (about 20 bytes). The first call of a session (see
	// Result.Open) always carries a short message.
	Size int
	// OpenParallel is how many sessions are opened at once; default 64.
	// With 1 they open one after another, so that each open measures a
	// session's startup rather than contention between opens.
	OpenParallel int
	// CallTimeout bounds one call, including reading its reply; default 30s.
	CallTimeout time.Duration
	// Progress, if set, is called every ProgressInterval (default 1s) from
	// one goroutine while sessions open and calls run.
	Progress         func(Progress)
	ProgressInterval time.Duration
	// Window, if set, is called from Run's goroutine just before the
	// measured window opens (true) and just after it closes (false), for a
	// caller that measures something else over exactly that window (the
	// CPU time a server used). It is not called if the run ends before the
	// window opens.
	Window func(open bool)
}

// Progress is a snapshot of a run, for live reporting.
type Progress struct {
	Phase   string // "opening", "warmup" or "measuring"
	Elapsed time.Duration
	Opened  int    // sessions open
	Calls   uint64 // calls completed, warmup included
	Errors  uint64
	Crossed uint64
	// NotEchoed counts replies whose text carries no message of the run:
	// the server's echo does not return its message.
	NotEchoed uint64
}

// Result is what a run measured.
type Result struct {
	Sessions    int
	Concurrency int
	Elapsed     time.Duration // the measured window
	// Calls is the number of calls started and answered correctly inside
	// the measured window; CallsPerSec is Calls / Elapsed.
	Calls       uint64
	CallsPerSec float64
	// PayloadBytes is the message bytes of those calls, the same each way
	// (the echo returns what it was sent); BytesPerSec is PayloadBytes /
	// Elapsed.
	PayloadBytes uint64
	BytesPerSec  float64
	// Errors and Crossed count every call of the run, the sessions' first
	// calls and warmup included, and the calls in flight when it ended (they are always awaited, so a
	// lost reply shows as an error, never as nothing).
	Errors  uint64
	Crossed uint64
	// NotEchoed counts the replies, of the same calls, whose text carries
	// no message of the run (neither the call's own nor another's): the
	// server's "echo" does not return its message, so they cannot be
	// checked. They are neither errors nor crossed, nor measured.
	NotEchoed  uint64
	FirstError string // an example error, "" if none
	Latency    Histogram
	// Open holds, per session opened, the time from sending initialize to
	// the reply of its first tools/call (after notifications/initialized):
	// what opening a session costs a client. For a stateless version, from
	// sending server/discover to the reply of the first tools/call.
	Open Histogram
}

// P returns the latency quantile q of the measured calls.
func (r *Result) P(q float64) time.Duration { return r.Latency.Quantile(q) }

const defaultVersion = "2025-11-25"

func (o *Options) setDefaults() error {
	if o.URL == "" {
		return errors.New("loadgen: URL is required")
	}
	if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("loadgen: URL %q is not an http(s) URL", o.URL)
	}
	if o.Sessions <= 0 {
		o.Sessions = 32
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Size < 0 || o.Size > MaxSize {
		return fmt.Errorf("loadgen: Size %d is not between 0 and %d", o.Size, MaxSize)
	}
	if o.OpenParallel <= 0 {
		o.OpenParallel = 64
	}
	o.Warmup = max(o.Warmup, 0)
	if o.Version == "" {
		o.Version = defaultVersion
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = time.Second
	}
	return nil
}

// Phases of a run, read by callers on every call.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// caller is one goroutine's state. Its histogram and firstErr are written
// only by that goroutine and read after it exits; the counters are atomics
// for the progress reporter.
type caller struct {
	sess     *session
	prefix   []byte // message prefix unique to this caller in this run
	size     int    // message length (Options.Size)
	filler   []byte // padding, shared read-only by all callers
	hist     Histogram
	measured uint64 // calls
	bytes    uint64 // message bytes of the measured calls
	firstErr error
	// endedInWindow is called after each call begun in the measured
	// window ends, however it ended (it closes the run's first channel
	// once).
	endedInWindow func()

	calls, errors, crossed, notEchoed atomic.Uint64
}

// Run opens the sessions, drives calls through warmup and the measured
// duration, waits for every call in flight, deletes the sessions and
// returns what it measured. It fails if any session cannot be opened. If
// ctx ends early it returns what was measured so far with ctx's error.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.setDefaults(); err != nil {
		return Result{}, err
	}
	tr := newTransport(o.Sessions * o.Concurrency)
	defer tr.CloseIdleConnections()
	ep := newEndpoint(&http.Client{Transport: tr}, o.URL, o.Header, o.Version)

	start := time.Now()
	var phase atomic.Int32
	var opened atomic.Int64
	callers := make([]*caller, 0, o.Sessions*o.Concurrency)
	var callersMu sync.Mutex // guards callers while the reporter may read it
	// opens counts the outcomes of the sessions' first calls, as a caller
	// that made them would, and times the opens in its histogram.
	opens := &caller{}
	phaseName := atomic.Value{}
	phaseName.Store("opening")
	stopReport := report(o.Progress, o.ProgressInterval, func() Progress {
		p := Progress{Phase: phaseName.Load().(string), Elapsed: time.Since(start), Opened: int(opened.Load()),
			Errors: opens.errors.Load(), Crossed: opens.crossed.Load(), NotEchoed: opens.notEchoed.Load()}
		callersMu.Lock()
		for _, c := range callers {
			p.Calls += c.calls.Load()
			p.Errors += c.errors.Load()
			p.Crossed += c.crossed.Load()
			p.NotEchoed += c.notEchoed.Load()
		}
		callersMu.Unlock()
		return p
	})
	defer stopReport()

	nonce := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	sessions, err := openSessions(ctx, ep, o.Sessions, o.OpenParallel, nonce, &opened, opens)
	defer closeSessions(ep, sessions)
	if err != nil {
		return Result{Sessions: len(sessions), Open: opens.hist}, err
	}

	var filler []byte
	if o.Size > 0 {
		filler = newFiller(o.Size)
	}
	first := make(chan struct{}) // closed as the first call begun in the window ends
	var firstOnce sync.Once
	endedInWindow := func() { firstOnce.Do(func() { close(first) }) }
	callersMu.Lock()
	for i, s := range sessions {
		for j := range o.Concurrency {
			callers = append(callers, &caller{
				sess: s, size: o.Size, filler: filler, endedInWindow: endedInWindow,
				prefix: fmt.Appendf(nil, "%s-s%d-c%d-", nonce, i, j),
			})
		}
	}
	callersMu.Unlock()

	phaseName.Store("warmup")
	var wg sync.WaitGroup
	for _, c := range callers {
		wg.Go(func() { c.run(ctx, &phase, o.CallTimeout) })
	}
	var mStart, mEnd time.Time
	ctxErr := sleep(ctx, o.Warmup)
	if ctxErr == nil {
		if o.Window != nil {
			o.Window(true)
		}
		mStart = time.Now()
		phase.Store(phaseMeasure)
		phaseName.Store("measuring")
		ctxErr = sleep(ctx, o.Duration)
		if ctxErr == nil {
			// The window lasts until one call begun in it has ended
			// too: shorter than one call (a large payload, a busy
			// machine), it would measure nothing. Past CallTimeout every
			// call begun in it has ended.
			t := time.NewTimer(o.CallTimeout)
			select {
			case <-first:
			case <-t.C:
			case <-ctx.Done():
				ctxErr = ctx.Err()
			}
			t.Stop()
		}
	}
	mEnd = time.Now()
	phase.Store(phaseStop)
	if o.Window != nil && !mStart.IsZero() {
		o.Window(false)
	}
	wg.Wait()

	res := Result{Sessions: len(sessions), Concurrency: o.Concurrency, Open: opens.hist}
	if !mStart.IsZero() {
		res.Elapsed = mEnd.Sub(mStart)
	}
	for _, c := range callers {
		res.Latency.Merge(&c.hist)
		res.Calls += c.measured
		res.PayloadBytes += c.bytes
	}
	for _, c := range append([]*caller{opens}, callers...) {
		res.Errors += c.errors.Load()
		res.Crossed += c.crossed.Load()
		res.NotEchoed += c.notEchoed.Load()
		if res.FirstError == "" && c.firstErr != nil {
			res.FirstError = c.firstErr.Error()
		}
	}
	if res.Elapsed > 0 {
		res.CallsPerSec = float64(res.Calls) / res.Elapsed.Seconds()
		res.BytesPerSec = float64(res.PayloadBytes) / res.Elapsed.Seconds()
	}
	return res, ctxErr
}

// run makes calls one after another until the phase is phaseStop or ctx
// ends. A call counts as measured if it started in phaseMeasure and ended
// before phaseStop.
func (c *caller) run(ctx context.Context, phase *atomic.Int32, timeout time.Duration) {
	var sc scratch
	var msg []byte
	var unique int
	for seq := uint64(0); ; seq++ {
		p := phase.Load()
		if p == phaseStop || ctx.Err() != nil {
			return
		}
		msg, unique = buildMessage(msg, c.prefix, seq, c.size, c.filler)
		id := c.sess.nextID.Add(1)
		cctx, cancel := context.WithTimeout(ctx, timeout)
		t0 := time.Now()
		err := c.sess.call(cctx, id, msg, unique, &sc)
		d := time.Since(t0)
		cancel()
		if p == phaseMeasure {
			c.endedInWindow()
		}
		switch {
		case err == nil:
			if p == phaseMeasure && phase.Load() == phaseMeasure {
				c.hist.Record(d)
				c.measured++
				c.bytes += uint64(len(msg))
			}
		case ctx.Err() != nil:
			return // the run was cancelled: not the server's fault
		case errors.Is(err, errCrossed):
			c.crossed.Add(1)
		case errors.Is(err, errNotEchoed):
			c.notEchoed.Add(1)
		default:
			c.errors.Add(1)
			if c.firstErr == nil {
				c.firstErr = err
			}
		}
		c.calls.Add(1)
	}
}

// openSessions opens n sessions, parallel at a time, and makes each one's
// first tools/call (a short message made from nonce). A session counts as
// open once initialize and notifications/initialized succeed (a stateless
// client's, once server/discover does); the outcome
// of its first call is counted in firsts' errors and crossed, and if that
// call succeeded, firsts.hist records how long the open took, up to its
// reply. On error it returns the sessions it did open (for the caller to
// close) and the first error.
func openSessions(ctx context.Context, ep *endpoint, n, parallel int, nonce string, opened *atomic.Int64, firsts *caller) ([]*session, error) {
	sessions := make([]*session, n)
	errs := make([]error, n)
	callErrs := make([]error, n)
	took := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, parallel) {
		wg.Go(func() {
			var sc scratch
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				octx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				sessions[i], errs[i] = ep.open(octx)
				if errs[i] == nil {
					opened.Add(1)
					msg := fmt.Appendf(nil, "%s-s%d-open", nonce, i)
					callErrs[i] = sessions[i].call(octx, sessions[i].nextID.Add(1), msg, len(msg), &sc)
					took[i] = time.Since(t0)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	for i, err := range callErrs {
		switch {
		case sessions[i] == nil:
		case err == nil:
			firsts.hist.Record(took[i])
		case ctx.Err() != nil:
		case errors.Is(err, errCrossed):
			firsts.crossed.Add(1)
		case errors.Is(err, errNotEchoed):
			firsts.notEchoed.Add(1)
		default:
			firsts.errors.Add(1)
			if firsts.firstErr == nil {
				firsts.firstErr = fmt.Errorf("first tools/call: %w", err)
			}
		}
	}
	var ok []*session
	for _, s := range sessions {
		if s != nil {
			ok = append(ok, s)
		}
	}
	failed := 0
	var first error
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return ok, err
	}
	if failed > 0 {
		return ok, fmt.Errorf("loadgen: %d of %d sessions failed to open: %w", failed, n, first)
	}
	return ok, nil
}

// closeSessions deletes sessions, 64 at a time, within 30 seconds overall.
func closeSessions(ep *endpoint, sessions []*session) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(sessions), 64) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(sessions) {
					return
				}
				sessions[i].close(ctx)
			}
		})
	}
	wg.Wait()
}

// sleep waits d or until ctx ends, returning ctx's error in that case.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// report calls progress with snapshot() every interval until the returned
// stop function is called; stop waits for the reporter to exit.
func report(progress func(Progress), interval time.Duration, snapshot func() Progress) (stop func()) {
	return every(interval, progress != nil, func() { progress(snapshot()) })
}

// every runs f every interval in one goroutine (if on) until stop.
func every(interval time.Duration, on bool, f func()) (stop func()) {
	if !on {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}
