package front

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file bounds how long a forward (forward.go) waits for the owner to
// begin its answer, where the owner's protocol bounds it: the owner
// answers a POST of a 2025-11-25 (or later) session within ReplyWait (one
// JSON body, or past ReplyWait an SSE stream whose headers go out at
// once), a GET as soon as its stream is attached, a legacy POST once its
// messages are handed on. An owner that accepted such a request and sends
// no headers long after is wedged (stopped, deadlocked, out of CPU): the
// client is answered here, once, instead of hanging for as long as the
// owner does. The bound is on the headers only: a stream that began runs
// for as long as it runs.

// Owner answer wait: ReplyWait plus ownerMargin, the owner's other waits
// before its headers, each of them bounded:
const (
	// ownerAuthWait: the owner authenticates the request again, and may
	// fetch a key set or introspect a token (internal/auth bounds each
	// fetch by its FetchTimeout, which the gateway leaves at 10 s).
	ownerAuthWait = 10 * time.Second
	// ownerSlack: scheduling and garbage collection of a replica on a
	// loaded machine, and its Redis calls (each bounded by 250 ms).
	ownerSlack = time.Second
)

// ownerMargin adds reattachWait (stream.go): a GET for a stream whose
// previous connection has not let go yet waits that long. 13 s in all; a
// variable only so that tests of a wedged owner need not wait that long.
var ownerMargin = ownerAuthWait + reattachWait + ownerSlack

// errOwnerSilent is the cause of a forward cancelled because its owner
// sent no headers within ownerAnswerWait.
var errOwnerSilent = errors.New("the replica holding the session sent no answer in time")

// ownerAnswerWait returns how long the owner of r may take to begin its
// answer, or 0 when nothing bounds it: a POST of a session older than
// 2025-11-25 gets one JSON body when its request ends, however long that
// takes; a stateless retry is answered at its first message; a DELETE
// ends the session's process first. The session's version is the one the
// client names in MCP-Protocol-Version (a client naming a newer one than
// its session's is answered 504 after the wait, where its call takes
// longer: it said it could resume).
func (h *Handler) ownerAnswerWait(r *http.Request) time.Duration {
	switch {
	case r.Method == http.MethodGet:
	case r.Method != http.MethodPost:
		return 0
	case r.Header.Get("Mcp-Session-Id") != "":
		if !protocol.PrimesStreams(headerVersion(r.Header)) {
			return 0
		}
	case !r.URL.Query().Has("sessionId"):
		return 0 // not a legacy POST: a stateless retry
	}
	return h.cfg.ReplyWait + ownerMargin
}

// ownerClock cancels a forward whose owner sends no headers within wait
// of the request's end reaching it. Every replica of a cluster has the
// same config, so the forwarding replica's ReplyWait is the owner's.
type ownerClock struct {
	wait   time.Duration
	cancel context.CancelCauseFunc

	body *bodyCopy // the request's body as it went, for its id

	mu      sync.Mutex
	t       *time.Timer // started once the request is written
	fired   bool        // cancelled: too late for the headers
	stopped bool        // the headers came first: a timer firing now is too late
}

type ownerClockKey struct{}

// startOwnerClock returns ctx for a forward of r bounded by
// ownerAnswerWait, with the clock and the cancel to call when it ends;
// for a forward without a bound, ctx itself, a nil clock and a no-op.
func (h *Handler) startOwnerClock(ctx context.Context, r *http.Request) (context.Context, *ownerClock, func()) {
	wait := h.ownerAnswerWait(r)
	if wait <= 0 {
		return ctx, nil, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	c := &ownerClock{wait: wait, cancel: cancel}
	if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
		c.body = &bodyCopy{r: r.Body, max: h.cfg.MaxBodyBytes}
	}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: c.wrote})
	return context.WithValue(ctx, ownerClockKey{}, c), c, func() {
		c.stop()
		cancel(nil)
	}
}

// wrote starts the clock once the whole request reached the owner: the
// client's upload, however slow, is not the owner's delay. A request the
// transport writes again (its connection broke before an answer) starts
// it again.
func (c *ownerClock) wrote(info httptrace.WroteRequestInfo) {
	if info.Err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.fired || c.stopped:
	case c.t == nil:
		c.t = time.AfterFunc(c.wait, c.expire)
	default:
		c.t.Reset(c.wait)
	}
}

func (c *ownerClock) expire() {
	c.mu.Lock()
	late := c.stopped // the timer fired as the headers came: they won
	c.fired = !late
	c.mu.Unlock()
	if !late {
		c.cancel(errOwnerSilent)
	}
}

// stop stops the clock as the owner's headers come, and reports whether
// they came in time: before the clock cancelled the forward. Whichever of
// the two takes the lock first decides.
func (c *ownerClock) stop() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fired {
		return false
	}
	c.stopped = true
	if c.t != nil {
		c.t.Stop()
	}
	return true
}

// expired reports whether the clock ran out before the owner's headers.
func (c *ownerClock) expired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired
}

// headersCame stops the clock of the forward resp answers, if it has one,
// and reports whether the headers came in time.
func headersCame(resp *http.Response) bool {
	c, _ := resp.Request.Context().Value(ownerClockKey{}).(*ownerClock)
	return c == nil || c.stop()
}

// answerSilent answers r, whose owner sent no headers in time: 504, and
// a JSON-RPC error with the request's id as the client wrote it when its
// body was one request (it went whole to the owner before the clock
// started). The request may still run at the owner if it ever wakes; it
// sees its client gone then, as for a client that left.
func (c *ownerClock) answerSilent(w http.ResponseWriter) {
	var id []byte
	if c.body != nil {
		if m, err := jsonrpc.Parse(c.body.buf); err == nil && m.Kind == jsonrpc.KindRequest {
			id = m.Bytes(m.ID)
		}
	}
	msg := "mcpgate: the replica holding the session did not begin its answer within " + c.wait.String() + "; the request may or may not have run"
	writeErrorID(w, http.StatusGatewayTimeout, id, protocol.CodeRequestTimeout, msg, nil)
}

// bodyCopy is a request body that keeps what was read from it, up to max
// bytes (the owner refuses a bigger body anyway).
type bodyCopy struct {
	r   io.ReadCloser
	max int64
	buf []byte
}

func (b *bodyCopy) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if room := b.max - int64(len(b.buf)); room > 0 {
		b.buf = append(b.buf, p[:min(int64(n), room)]...)
	}
	return n, err
}

func (b *bodyCopy) Close() error { return b.r.Close() }
