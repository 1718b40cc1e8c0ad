package servers

import (
	"bytes"
	"log/slog"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/mux"
)

// Translation processes: the processes of a shared server of the session
// eras that serve its translated stateless requests (shared.go), apart
// from the sessions' process.
//
// Why apart. A server of the session eras asks its client (sampling,
// elicitation, roots) within one initialized connection, and the gateway
// can attribute such a request only while exactly one client has requests
// written to the process (mux attributeLocked). A stateless request whose
// server request became an input_required answer (eras/mrtr.go) stays
// parked, its call still written, for up to InputWait: on a shared
// process, every other client's server request would be refused "cannot
// route" meanwhile. And a process initialized with the gateway's own
// capabilities (all it can route) tells a server checking the client's
// capabilities that a stateless request declared what it did not.
//
//   - A stateless request goes to a process initialized with the client
//     capabilities it declared (capSet: sampling, elicitation, roots, each
//     present or not), the least busy of those not waiting for a client's
//     answer (the fewest connections, each one request in flight). With
//     config "processes" N, a set grows to N such processes, one more
//     each time every one of them has a request in flight; they run as
//     long as the Server, like a set's first.
//   - When every process of its set that is up waits for one (a request
//     parked for input), an extra process of the set is started, while
//     the server has fewer than max extra processes (over all sets);
//     beyond that, or when the extra cannot be spawned, the least busy of
//     its set serves (its server requests may then be refused, as on one
//     shared process). A set whose processes are all down (backing off
//     after an exit) gets no extra, which would fail alike: its requests
//     get the error naming the cause at once, as the sessions' get. A
//     set's first process is always started, outside the bound:
//     capabilities are not stretched to fit a process, and there are at
//     most 8 sets.
//   - A connection picks its process on first use (Handle, ServerInit),
//     not when it opens: the retry of a parked request opens a connection
//     it never uses (the parked one's serves it), and must not start one.
//   - Extra processes with no connection for idle are stopped; a set's
//     first process runs as long as the Server. All are supervised like
//     the sessions' process (restarted after a crash), counted in
//     Pending, and stopped by Close, which waits for them.
//   - A remote with "principalHeaders" keys its processes by credential
//     too: a process serves one principal's requests only, and is stopped
//     when idle like an extra, since principals come and go
//     (credentials.go).
//   - Each process is a server instance of its own. A subscriptions/listen
//     (served by the gateway from the broadcasts of its connection's
//     process) must not depend on which instance served the call that
//     changed a list: each process's list_changed broadcasts are relayed
//     to the connections of the others. resources/updated is not: a
//     resource is subscribed to on the listen's process, whose state is
//     its own.

const (
	// maxExtras bounds a server's extra translation processes (a set's
	// first process is not one).
	maxExtras = 4
	// translatorIdle is how long an extra process may go without a
	// connection before it is stopped.
	translatorIdle = time.Minute
)

// capSet is the client capabilities a stateless request declared, as far
// as they choose a translation process (eras.CapSet).
type capSet = eras.CapSet

// setRoots is a set with roots alone.
const setRoots = eras.CapRoots

// translation is a shared server's pool of translation processes.
type translation struct {
	// Static after construction.
	name  string
	spawn func(set capSet, extra bool, cred credential) (*proc, error)
	log   *slog.Logger
	max   int           // maxExtras; a field for tests
	base  int           // a set's processes that are not extras: config "processes" (0 counts as 1)
	idle  time.Duration // translatorIdle; a field for tests

	wake chan struct{} // capacity 1: the reaper looks again
	done chan struct{} // closed by close: the reaper returns
	// wg counts the reaper; Add only under mu while not closed, so that
	// it comes before the Wait in close.
	wg sync.WaitGroup

	mu sync.Mutex
	// guarded by mu:
	closed  bool
	procs   []*translator
	reaping bool // the reaper runs

	// cmu guards conns, apart from mu: relays take it on upstream readers,
	// which must never wait for a spawn (done under mu).
	cmu   sync.Mutex
	conns map[*tconn]struct{} // connections bound to a process
}

// translator is one translation process.
type translator struct {
	p     *proc
	set   capSet
	cred  string // credential.key: "" unless the remote has principalHeaders
	extra bool   // not its set's first: stopped when idle
	// guarded by translation.mu:
	conns     int       // connections bound to it
	idleSince time.Time // when conns last fell to 0
}

func newTranslation(cfg *config.Server, opts mux.Options, log *slog.Logger) *translation {
	t := &translation{
		name: cfg.Name, log: log, max: maxExtras, idle: translatorIdle,
		wake: make(chan struct{}, 1), done: make(chan struct{}), conns: map[*tconn]struct{}{},
	}
	t.spawn = func(set capSet, extra bool, cred credential) (*proc, error) {
		o := opts
		o.ClientCapabilities = set.Declared()
		o.Logger = log.With("translation", set.String())
		// An extra is short-lived and there may be a few: the system's
		// pipe size (see sharedPipeBytes).
		pipe := sharedPipeBytes
		if extra {
			pipe = 0
		}
		if cfg.Type == config.TypeHTTP {
			// A remote of the session eras: an upstream session each.
			return startRemote(cfg, cred.headers, o, o.Logger, handoff{})
		}
		return start(cfg, o, pipe, o.Logger)
	}
	return t
}

// open returns the connection of one translated stateless request; it
// takes a process on first use, one of cred's (see credentials.go).
func (t *translation) open(general conn.Stream, version string, caps []byte, cred credential) (statelessConn, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	return &tconn{t: t, general: general, version: version, caps: bytes.Clone(caps), set: eras.ParseCapSet(caps), cred: cred}, nil
}

// acquire returns the process a new connection of set and cred binds to,
// counting the connection; see the file comment for the choice. Processes
// of another credential are never considered: an upstream session serves
// one principal.
func (t *translation) acquire(set capSet, cred credential) (*translator, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	var free, least *translator
	var leastLoad load
	extras, bases := 0, 0
	for _, tp := range t.procs {
		if tp.extra {
			extras++
		}
		if tp.set != set || tp.cred != cred.key {
			continue
		}
		if !tp.extra {
			bases++
		}
		l := tp.load()
		if l.free() && (free == nil || tp.conns < free.conns) {
			free = tp
		}
		if least == nil || l.less(leastLoad) {
			least, leastLoad = tp, l
		}
	}
	if free != nil && (free.conns == 0 || bases >= max(t.base, 1)) {
		free.conns++
		return free, nil
	}
	if free != nil {
		// Every free process of set has a request in flight and the set
		// has fewer than "processes": one more, not an extra (it is
		// never stopped when idle).
		p, err := t.spawn(set, false, cred)
		if err != nil {
			free.conns++
			return free, nil
		}
		return t.addLocked(p, set, cred, false), nil
	}
	// No free process of set: none yet, or each down or waiting for input
	// (then the least busy is down only if all are).
	if least == nil || (!leastLoad.down && extras < t.max) {
		// Spawned under mu: requests arriving meanwhile wait for this
		// process rather than each starting one. A command that cannot be
		// run does not fail here (its supervisor retries with backoff).
		extra := least != nil
		p, err := t.spawn(set, extra, cred)
		if err == nil {
			return t.addLocked(p, set, cred, extra), nil
		}
		if least == nil {
			return nil, err
		}
		t.log.Warn("no extra process for stateless requests; the least busy one serves", "server", t.name, "capabilities", set.String(), "err", err)
	}
	least.conns++
	return least, nil
}

// addLocked adds the new process p of set and cred to the pool, with the
// connection it was spawned for counted. Called with mu held.
func (t *translation) addLocked(p *proc, set capSet, cred credential, extra bool) *translator {
	tp := &translator{p: p, set: set, cred: cred.key, extra: extra, conns: 1}
	p.m.Join(&relay{t: t, tp: tp})
	t.procs = append(t.procs, tp)
	if tp.idleStop() && !t.reaping {
		t.reaping = true
		t.wg.Add(1)
		go t.reap()
	}
	return tp
}

// idleStop reports whether tp is stopped when idle: an extra, or any
// process of a principal's (there may be many principals; each gets its
// processes back on its next request).
func (tp *translator) idleStop() bool { return tp.extra || tp.cred != "" }

// load is how busy a translation process is.
type load struct {
	down    bool // backing off or closed: requests would fail now
	waiting int  // server requests waiting for a client's answer
	conns   int
}

// load reads tp's load. Called with translation.mu held (it takes the
// Mux's lock after it).
func (tp *translator) load() load {
	return load{down: !tp.p.usable(), waiting: tp.p.m.ServerRequests(), conns: tp.conns}
}

// free reports whether a new request can go to the process without
// losing its server requests to another's wait.
func (l load) free() bool { return !l.down && l.waiting == 0 }

// less orders loads: up first, then fewer server requests waiting, then
// fewer connections.
func (l load) less(o load) bool {
	switch {
	case l.down != o.down:
		return !l.down
	case l.waiting != o.waiting:
		return l.waiting < o.waiting
	}
	return l.conns < o.conns
}

// release uncounts connection c of tp; an extra left without any starts
// its idle time.
func (t *translation) release(c *tconn, tp *translator) {
	t.cmu.Lock()
	delete(t.conns, c)
	t.cmu.Unlock()
	t.mu.Lock()
	tp.conns--
	idle := tp.conns == 0
	if idle {
		tp.idleSince = time.Now()
	}
	t.mu.Unlock()
	if idle && tp.idleStop() {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// reap stops extra processes idle for t.idle, until close.
func (t *translation) reap() {
	defer t.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		next, stop := t.due(time.Now())
		for _, tp := range stop {
			t.log.Info("stopping an idle extra process for stateless requests", "server", t.name, "capabilities", tp.set.String())
			tp.p.stop()
		}
		if next > 0 {
			timer.Reset(next)
		}
		select {
		case <-t.done:
			return
		case <-t.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// due takes the extra processes idle for t.idle out of the pool, and
// returns them and how long until the next one will be.
func (t *translation) due(now time.Time) (time.Duration, []*translator) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, nil // close stops them
	}
	var next time.Duration
	var stop []*translator
	keep := t.procs[:0]
	for _, tp := range t.procs {
		if tp.idleStop() && tp.conns == 0 {
			left := tp.idleSince.Add(t.idle).Sub(now)
			if left <= 0 {
				// Out of the pool under mu with no connection: none can
				// bind to it any more (acquire counts under mu).
				stop = append(stop, tp)
				continue
			}
			if next == 0 || left < next {
				next = left
			}
		}
		keep = append(keep, tp)
	}
	clear(t.procs[len(keep):])
	t.procs = keep
	return next, stop
}

// close stops every translation process, in parallel, and waits for them
// and for the reaper.
func (t *translation) close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	procs := t.procs
	t.procs = nil
	t.mu.Unlock()
	close(t.done)
	var wg sync.WaitGroup
	for _, tp := range procs {
		wg.Go(tp.p.stop)
	}
	wg.Wait()
	t.wg.Wait()
}

// pending returns the requests in flight on every translation process.
func (t *translation) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, tp := range t.procs {
		n += tp.p.m.Pending()
	}
	return n
}
