package mux

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// loopback is an in-process upstream that answers every request at once,
// from inside Send, the way a reader goroutine would deliver the reply.
type loopback struct {
	m    *Mux
	resp []byte
}

func (u *loopback) Send(_ context.Context, msg []byte) error { return u.TrySend(msg) }

func (u *loopback) TrySend(msg []byte) error {
	req, err := jsonrpc.Parse(msg)
	if err != nil || req.Kind != jsonrpc.KindRequest {
		return err
	}
	u.resp = append(u.resp[:0], `{"jsonrpc":"2.0","id":`...)
	u.resp = append(u.resp, req.Bytes(req.ID)...)
	u.resp = append(u.resp, `,"result":{"protocolVersion":"2025-11-25","content":[{"type":"text","text":"ok"}]}}`...)
	u.m.Line(1, u.resp)
	return nil
}

type discard struct{ replies int }

func (*discard) Send([]byte)    {}
func (d *discard) Reply([]byte) { d.replies++ }

// newLoopbackMux returns a ready shared Mux over a loopback upstream.
func newLoopbackMux(tb testing.TB) *Mux {
	m := New(Options{Name: "bench"})
	m.SetUpstream(testkit.Genless(&loopback{m: m}))
	m.Started(1)
	c := m.Join(&discard{})
	if err := c.waitReady(context.Background()); err != nil {
		tb.Fatal(err)
	}
	c.Close()
	tb.Cleanup(m.Close)
	return m
}

// BenchmarkMuxRoundTrip sends one client request through the multiplexer
// and delivers its reply: two forwarded messages per iteration.
func BenchmarkMuxRoundTrip(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(byteSize(size), func(b *testing.B) {
			m := newLoopbackMux(b)
			out := &discard{}
			c := m.Join(out)
			pad := strings.Repeat("x", size-120)
			raw := []byte(`{"jsonrpc":"2.0","id":"client-7","method":"tools/call","params":{"name":"echo","arguments":{"message":"` + pad + `"},"_meta":{"progressToken":"p"}}}`)
			msg, err := jsonrpc.Parse(raw)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				c.Handle(ctx, &msg, out)
			}
			if out.replies < b.N {
				b.Fatalf("%d replies for %d requests", out.replies, b.N)
			}
		})
	}
}

func byteSize(n int) string { return strconv.Itoa(n>>10) + "KB" }

// TestRoundTripNoAllocs keeps the multiplexer's hot path at two
// allocations per round trip (the pending call and the reply handed to the
// client's stream): one per forwarded message.
func TestRoundTripNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under -race")
	}
	m := newLoopbackMux(t)
	out := &discard{}
	c := m.Join(out)
	raw := []byte(`{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"progressToken":"p"}}}`)
	msg, err := jsonrpc.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c.Handle(ctx, &msg, out) // warm the pools and maps
	if n := testing.AllocsPerRun(200, func() { c.Handle(ctx, &msg, out) }); n > 2 {
		t.Fatalf("%.1f allocations per round trip, want at most 2", n)
	}
}

// BenchmarkJoinCloseAmong10k joins and closes one client of a Mux that
// 10,000 other sessions share: what a stateless request (a client of its
// own) or a session's end costs beside many others. No session asked for
// a logging level, so the close need not look at the others.
func BenchmarkJoinCloseAmong10k(b *testing.B) {
	m := newLoopbackMux(b)
	for range 10000 {
		m.Join(&discard{})
	}
	out := &discard{}
	b.ReportAllocs()
	for b.Loop() {
		m.Join(out).Close()
	}
}

// BenchmarkLogLineAmong10k delivers a server's log line while 10,000
// sessions that have nothing in flight share the server: attributing it
// (to the one session with a call written, here none) does not look at
// them.
func BenchmarkLogLineAmong10k(b *testing.B) {
	m := newLoopbackMux(b)
	for range 10000 {
		m.Join(&discard{})
	}
	line := []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`)
	b.ReportAllocs()
	for b.Loop() {
		m.Line(1, line)
	}
}

// BenchmarkResourceUpdatedAmong10k delivers a resources/updated for a URI
// one session of 10,000 subscribed to: it goes to that one without a look
// at the others.
func BenchmarkResourceUpdatedAmong10k(b *testing.B) {
	m := newLoopbackMux(b)
	for range 10000 {
		m.Join(&discard{})
	}
	sub := m.Join(&discard{})
	m.mu.Lock()
	m.subscribeLocked(sub, "file:///watched")
	m.mu.Unlock()
	line := []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///watched"}}`)
	b.ReportAllocs()
	for b.Loop() {
		m.Line(1, line)
	}
}
