package front

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/cluster"
	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The resumable streams of memCluster: what the replicas' store keeps of
// each, and how many writes it took.

type memStreamKey struct {
	sid    string
	stream uint64
}

type memStream struct {
	instance, advertise string
	requests            [][]byte
	finals              []session.Final
	events              []session.Event
}

func (r *memReplica) OpenStream(sid string, stream uint64, requests [][]byte, _ time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	r.streams[memStreamKey{sid, stream}] = &memStream{instance: r.instance, advertise: r.advertise, requests: requests}
	return true
}

func (r *memReplica) AppendEvent(sid string, stream uint64, ev session.Event, _ time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	ms := r.streams[memStreamKey{sid, stream}]
	if ms == nil || r.dropEvents {
		return false
	}
	if ev.Final {
		f := session.Final{Seq: ev.Seq}
		if m, err := jsonrpc.Parse(ev.Data); err == nil && m.ID.Present() {
			f.ID = bytes.Clone(m.Bytes(m.ID))
		}
		ms.finals = append(ms.finals, f)
	}
	if ev.Data != nil {
		ms.events = append(ms.events, ev)
	}
	return true
}

func (r *memReplica) Events(_ context.Context, sid string, stream, since uint64) (*session.Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := r.streams[memStreamKey{sid, stream}]
	if ms == nil {
		return nil, nil
	}
	rec := &session.Record{Instance: ms.instance, Advertise: ms.advertise, Requests: ms.requests, Finals: ms.finals, After: since}
	for _, ev := range ms.events {
		if ev.Seq > since {
			rec.Events = append(rec.Events, ev)
		}
	}
	return rec, nil
}

// streamWrites returns how many stream writes the store took, and whether
// it holds a final reply of some stream.
func (c *memCluster) streamWrites() (n int, final bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ms := range c.streams {
		final = final || len(ms.finals) > 0
	}
	return c.writes, final
}

// sseResponse is an SSE response read event by event.
type sseResponse struct {
	resp *http.Response
	r    *sse.Reader
}

// openSSE sends a request (POST with body, else GET) expecting an SSE
// response.
func openSSE(t *testing.T, ctx context.Context, url, method, body string, hdr ...string) *sseResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url+mcpPath, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s %q, want an SSE stream: %s", method, resp.Status, resp.Header.Get("Content-Type"), b)
	}
	return &sseResponse{resp: resp, r: sse.NewReader(bufio.NewReader(resp.Body), 0)}
}

// rest reads the messages left until the stream ends.
func (s *sseResponse) rest(t *testing.T) []string {
	t.Helper()
	var msgs []string
	for {
		ev, err := s.r.Next()
		if errors.Is(err, io.EOF) {
			return msgs
		}
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if len(ev.Data) > 0 {
			msgs = append(msgs, string(ev.Data))
		}
	}
}

// primed reads the priming event of a stream and returns its id.
func (s *sseResponse) primed(t *testing.T) string {
	t.Helper()
	ev, err := s.r.Next()
	if err != nil || ev.ID == "" || len(ev.Data) != 0 {
		t.Fatalf("priming event: %+v %v", ev, err)
	}
	return ev.ID
}

const v1125 = "2025-11-25"

// twoPortableReplicas starts replicas a and b of one memCluster serving
// portable sessions of 2025-11-25, opens a session on a, and returns with
// them a context that bounds the test's requests.
func twoPortableReplicas(t *testing.T) (ctx context.Context, cl *memCluster, a, b *replica, pa *portableBackend, sid string) {
	ring := testRing(t)
	cl = newMemCluster()
	pa, pb := &portableBackend{fakeBackend: newFakeBackend()}, &portableBackend{fakeBackend: newFakeBackend()}
	pa.version = v1125
	a = startReplica(t, cl, "a", ring, pa)
	b = startReplica(t, cl, "b", ring, pb)
	sid = initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", func() bool { rec, _, _ := cl.replica("", "").State(context.Background(), sid); return rec != nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, cl, a, b, pa, sid
}

// holdOn POSTs a held call of id `"h-1"` to replica r, of backend pb, and
// returns its SSE stream, primed (its reply waited longer than
// ReplyWait), once the call is held by the session's connection.
func holdOn(t *testing.T, ctx context.Context, r *replica, pb *portableBackend, sid string) (*sseResponse, string, *fakeConn) {
	t.Helper()
	post := openSSE(t, ctx, r.srv.URL, http.MethodPost, `{"jsonrpc":"2.0","id":"h-1","method":"hold"}`,
		"Mcp-Session-Id", sid, "Mcp-Protocol-Version", v1125)
	last := post.primed(t)
	c := <-pb.conns // the initialize's connection
	testkit.Receive(t, c.held, "the call held")
	return post, last, c
}

// resumeOn resumes, on replica r, the stream of Last-Event-ID last.
func resumeOn(t *testing.T, ctx context.Context, r *replica, sid, last string) []string {
	t.Helper()
	get := openSSE(t, ctx, r.srv.URL, http.MethodGet, "", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v1125, "Last-Event-ID", last)
	return get.rest(t)
}

// A call in flight on a stream whose replica died: the client resumes on
// another replica and gets exactly one answer, an error with its id byte
// for byte, and the stream ends.
func TestStreamOfDeadReplicaAnswersOnce(t *testing.T) {
	ctx, cl, a, b, pa, sid := twoPortableReplicas(t)
	_, last, c := holdOn(t, ctx, a, pa, sid)
	testkit.WaitFor(t, "the stream recorded", func() bool { n, _ := cl.streamWrites(); return n > 0 })
	cl.kill("a")

	msgs := resumeOn(t, ctx, b, sid, last)
	oneAnswer(t, "resumed on the other replica", msgs, errReplicaLost)
	if f := b.h.Forwards(); f.Forwarded != 0 {
		t.Errorf("forwards: %+v, want none (the writer is dead)", f)
	}
	c.release() // the dead replica's reply, which nobody reads
}

// The writer alive: the resuming GET is forwarded to it, and the reply,
// once it comes, reaches the client through the other replica, once.
func TestStreamOfLiveReplicaForwarded(t *testing.T) {
	ctx, _, a, b, pa, sid := twoPortableReplicas(t)
	post, last, c := holdOn(t, ctx, a, pa, sid)
	post.resp.Body.Close() // the client's connection broke
	testkit.WaitFor(t, "the old reader gone", func() bool {
		st := a.h.store.Lookup(sid).Stream(streamID(t, last))
		return st != nil && !st.Attached()
	})
	get := openSSE(t, ctx, b.srv.URL, http.MethodGet, "", "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v1125, "Last-Event-ID", last)
	c.release()
	msgs := get.rest(t)
	oneAnswer(t, "resumed through the other replica", msgs, `"released":true`)
	if f := b.h.Forwards(); f.Forwarded != 1 {
		t.Errorf("forwards: %+v, want one", f)
	}
}

// A reply the dead replica wrote to the store before it died is replayed,
// not replaced by an error; a Last-Event-ID after it replays nothing and
// answers nothing twice.
func TestStreamOfDeadReplicaReplaysStoredReply(t *testing.T) {
	ctx, cl, a, b, pa, sid := twoPortableReplicas(t)
	post, last, c := holdOn(t, ctx, a, pa, sid)
	c.release()
	got := post.rest(t)
	if len(got) != 1 || !strings.Contains(got[0], `"released":true`) {
		t.Fatalf("the POST's stream: %q", got)
	}
	final := post.r.LastEventID()
	testkit.WaitFor(t, "the reply recorded", func() bool { _, f := cl.streamWrites(); return f })
	cl.kill("a")

	msgs := resumeOn(t, ctx, b, sid, last)
	oneAnswer(t, "resumed after the priming event", msgs, `"released":true`)
	if msgs := resumeOn(t, ctx, b, sid, final); len(msgs) != 0 {
		t.Fatalf("resumed after the reply: %q, want nothing", msgs)
	}
}

// A replica restarted under the same instance id and address (a
// container restarted in its pod) is not the writer of its former life's
// streams: the other replica forwards the resume to the address, where
// the new life replays the stream, with one error for the lost call.
func TestStreamOfFormerLifeReplayed(t *testing.T) {
	ctx, cl, a, b, pa, sid := twoPortableReplicas(t)
	post, last, c := holdOn(t, ctx, a, pa, sid)
	testkit.WaitFor(t, "the stream recorded", func() bool { n, _ := cl.streamWrites(); return n > 0 })
	post.resp.Body.Close()
	addr := a.srv.Listener.Addr().String()
	a.srv.Close()
	again := &portableBackend{fakeBackend: newFakeBackend()}
	a2 := serveReplica(t, addr, testRing(t), again, func(advertise string) Cluster { return cl.replica("a", advertise) })

	msgs := resumeOn(t, ctx, b, sid, last)
	oneAnswer(t, "resumed through the other replica", msgs, errReplicaLost)
	if fb, fa := b.h.Forwards(), a2.h.Forwards(); fb.Forwarded != 1 || fa.Forwarded != 0 {
		t.Errorf("forwards: %+v by the other replica, %+v by the new life; want one hop, by the other", fb, fa)
	}
	c.release() // the former life's reply, which nobody reads
}

// Replies faster than ReplyWait cost the store no write; a slow one's
// stream is recorded.
func TestFastRepliesNotRecorded(t *testing.T) {
	ctx, cl, a, _, pa, sid := twoPortableReplicas(t)
	for range 20 {
		resp, body := do(t, a.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v1125)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("ping: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if n, _ := cl.streamWrites(); n != 0 {
		t.Fatalf("%d stream writes for 20 replies in JSON, want 0", n)
	}
	_, _, c := holdOn(t, ctx, a, pa, sid)
	testkit.WaitFor(t, "the slow call's stream recorded", func() bool { n, _ := cl.streamWrites(); return n > 0 })
	c.release()
}

// oneAnswer fails the test unless msgs is one message, answering h-1 and
// holding want.
func oneAnswer(t *testing.T, what string, msgs []string, want string) {
	t.Helper()
	if len(msgs) != 1 || !strings.Contains(msgs[0], `"id":"h-1"`) || !strings.Contains(msgs[0], want) {
		t.Fatalf("%s: %q, want one answer to h-1 holding %s", what, msgs, want)
	}
}

// kill makes instance a replica without a heartbeat.
func (c *memCluster) kill(instance string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead[instance] = true
}

// streamID is the stream an event id names.
func streamID(t *testing.T, id string) uint64 {
	stream, _, ok := session.ParseEventID(id)
	if !ok {
		t.Fatalf("event id %q", id)
	}
	return stream
}

// The same through a real Redis and internal/cluster: 20 replies faster
// than ReplyWait cost Redis no write (counted by Redis itself); a slow
// call's stream is recorded, and when its replica is gone (listener
// closed, heartbeats stopped) the client resuming on the other replica
// gets exactly one error for its call.
func TestStreamsThroughRedis(t *testing.T) {
	addr := testkit.Redis(t)
	ring := testRing(t)
	join := func(instance string, stop *context.CancelFunc) func(string) Cluster {
		return func(advertise string) Cluster {
			c, cancel := runCluster(t, cluster.Config{Instance: instance, Advertise: advertise, RedisURL: "redis://" + addr + "/0",
				Heartbeat: 100 * time.Millisecond, Timeout: 5 * time.Second}, nil)
			*stop = cancel
			return c
		}
	}
	var stopA, stopB context.CancelFunc
	pa := &portableBackend{fakeBackend: newFakeBackend()}
	pa.version = v1125
	a := serveReplica(t, "", ring, pa, join("a", &stopA))
	b := serveReplica(t, "", ring, &portableBackend{fakeBackend: newFakeBackend()}, join("b", &stopB))
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sid := initSession(t, a.srv)
	testkit.WaitFor(t, "the handoff record stored", func() bool {
		rec, _, _ := b.h.cfg.Cluster.State(ctx, sid)
		return rec != nil
	})
	writes := func() int { return redisCalls(t, rdb, "xadd") + redisCalls(t, rdb, "hset") }
	before := writes()
	for range 20 {
		resp, body := do(t, a.srv, http.MethodPost, mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", v1125)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("ping: %d %s", resp.StatusCode, body)
		}
	}
	if n := writes() - before; n != 0 {
		t.Fatalf("%d Redis writes for 20 replies faster than ReplyWait, want 0", n)
	}

	post, last, c := holdOn(t, ctx, a, pa, sid)
	testkit.WaitFor(t, "the stream recorded in Redis", func() bool {
		rec, err := b.h.cfg.Cluster.Events(ctx, sid, streamID(t, last), 0)
		return err == nil && rec != nil
	})
	if writes() == before {
		t.Fatal("Redis counted no write for the slow call's stream, which is recorded")
	}
	post.resp.Body.Close()
	a.srv.Close()
	stopA()
	msgs := resumeOn(t, ctx, b, sid, last)
	oneAnswer(t, "resumed on the other replica", msgs, errReplicaLost)
	c.release()
}

// redisCalls is how many times Redis ran command cmd, by its own count.
func redisCalls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, found := strings.Cut(info, "cmdstat_"+cmd+":calls=")
	if !found {
		return 0
	}
	n, _, _ := strings.Cut(rest, ",")
	calls, err := strconv.Atoi(n)
	if err != nil {
		t.Fatalf("commandstats of %s: %q", cmd, n)
	}
	return calls
}
