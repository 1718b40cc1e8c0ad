package mux

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/testkit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNegotiate(t *testing.T) {
	tests := []struct{ requested, upstream, want string }{
		{"2025-11-25", "2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-11-25", "2025-06-18"},
		{"2025-03-26", "2025-11-25", "2025-03-26"},
		{"2024-11-05", "2025-11-25", "2024-11-05"},
		{"2025-11-25", "2025-06-18", "2025-06-18"}, // never newer than the upstream agreed
		{"2099-01-01", "2025-11-25", "2025-11-25"}, // unknown: offer the newest
		{"", "2025-03-26", "2025-03-26"},
		{"2025-06-18", "", "2025-06-18"},
		{"2025-06-18", "1999-01-01", "2025-06-18"}, // an upstream version we do not speak counts as the latest
	}
	for _, tt := range tests {
		if got := Negotiate(tt.requested, tt.upstream); got != tt.want {
			t.Errorf("Negotiate(%q, %q) = %q, want %q", tt.requested, tt.upstream, got, tt.want)
		}
	}
}

func TestParseUintOnlyOwnIDs(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "7": 7, "18446744073709551615": 0} {
		got, ok := parseUint([]byte(in))
		if in == "18446744073709551615" {
			if ok {
				t.Errorf("%s: accepted a 20-digit id", in)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("%s: got %d %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", `"1"`, "-1", "1.0", "1e3", "12345678901234567890"} {
		if _, ok := parseUint([]byte(bad)); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestLevelRank(t *testing.T) {
	if !(levelRank("debug") < levelRank("info") && levelRank("error") < levelRank("emergency")) {
		t.Fatal("levels out of order")
	}
	if validLevel("verbose") || !validLevel("warning") {
		t.Fatal("validLevel")
	}
}

// silent is an upstream that answers only initialize and records the rest.
type silent struct {
	m    *Mux
	mu   sync.Mutex
	sent [][]byte
}

func (u *silent) Send(_ context.Context, msg []byte) error { return u.TrySend(msg) }

func (u *silent) TrySend(msg []byte) error {
	req, err := jsonrpc.Parse(msg)
	if err != nil {
		return err
	}
	if req.MethodIs("initialize") {
		u.m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+string(req.Bytes(req.ID))+`,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`))
		return nil
	}
	if req.MethodIs("notifications/initialized") {
		return nil
	}
	u.mu.Lock()
	u.sent = append(u.sent, bytes.Clone(msg))
	u.mu.Unlock()
	return nil
}

type collect struct {
	mu      sync.Mutex
	replies [][]byte
	done    chan struct{}
}

func (c *collect) Send([]byte) {}
func (c *collect) Reply(msg []byte) {
	c.mu.Lock()
	c.replies = append(c.replies, msg)
	c.mu.Unlock()
	select { // a signal per reply, as far as the test made room for
	case c.done <- struct{}{}:
	default:
	}
}

// TestDeadlinesInRegistrationOrder: calls answered out of order leave the
// deadline list consistent; the unanswered ones time out with -32001 and
// are cancelled upstream.
func TestDeadlinesInRegistrationOrder(t *testing.T) {
	// In a synctest bubble: the answer must come before the timeout,
	// which a busy machine could otherwise let fire first.
	synctest.Test(t, func(t *testing.T) {
		m := New(Options{Name: "t", Timeout: 100 * time.Millisecond})
		defer m.Close()
		up := &silent{m: m}
		m.SetUpstream(testkit.Genless(up))
		m.Started(1)
		out := &collect{done: make(chan struct{}, 3)}
		c := m.Join(out)
		for _, id := range []string{`"a"`, `"b"`, `"c"`} {
			msg, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{}}`))
			c.Handle(context.Background(), &msg, out)
		}
		// Answer the middle call: its upstream id is the second one written.
		up.mu.Lock()
		second, _ := jsonrpc.Parse(up.sent[1])
		up.mu.Unlock()
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+string(second.Bytes(second.ID))+`,"result":{}}`))
		for range 3 {
			<-out.done
		}
		got := map[string]string{}
		for _, r := range out.replies {
			msg, _ := jsonrpc.Parse(r)
			kind := "result"
			if msg.IsError {
				kind = "error"
				if !bytes.Contains(r, []byte(`-32001`)) {
					t.Errorf("timeout reply %s", r)
				}
			}
			got[string(msg.Bytes(msg.ID))] = kind
		}
		if got[`"a"`] != "error" || got[`"b"`] != "result" || got[`"c"`] != "error" {
			t.Fatalf("replies %v", got)
		}
		if m.Pending() != 0 || m.Stats().TimedOut != 2 {
			t.Fatalf("pending %d, timed out %d", m.Pending(), m.Stats().TimedOut)
		}
		// The callers hear first, the server afterwards: wait for the
		// cancellations.
		testkit.WaitFor(t, "2 cancellations upstream", func() bool {
			up.mu.Lock()
			cancels := 0
			for _, s := range up.sent {
				if bytes.Contains(s, []byte(`notifications/cancelled`)) {
					cancels++
				}
			}
			up.mu.Unlock()
			if cancels > 2 {
				t.Fatalf("%d cancellations upstream, want 2", cancels)
			}
			return cancels == 2
		})
	})
}

// A Mux with FirstID numbers its upstream requests from it, and matches
// the replies to them: what keeps two replicas' requests apart in one
// upstream session.
func TestFirstIDNumbersUpstreamRequests(t *testing.T) {
	const first = MaxFirstID - 1
	m := New(Options{Name: "t", Timeout: time.Minute, FirstID: first})
	defer m.Close()
	up := &silent{m: m}
	m.SetUpstream(testkit.Genless(up))
	m.Started(1)
	out := &collect{done: make(chan struct{}, 2)}
	c := m.Join(out)
	for _, id := range []string{`"a"`, `"b"`} {
		msg, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"_meta":{"progressToken":7}}}`))
		c.Handle(context.Background(), &msg, out)
	}
	up.mu.Lock()
	var ids []string
	for _, raw := range up.sent {
		msg, _ := jsonrpc.Parse(raw)
		ids = append(ids, string(msg.Bytes(msg.ID)))
		if tok := string(msg.Bytes(msg.ProgressToken)); tok != ids[len(ids)-1] {
			t.Errorf("progress token %s upstream, want the request's id %s", tok, ids[len(ids)-1])
		}
	}
	up.mu.Unlock()
	// The Mux's own initialize of the process took the first.
	want := []string{strconv.FormatUint(first+1, 10), strconv.FormatUint(first+2, 10)}
	if !slices.Equal(ids, want) {
		t.Fatalf("upstream ids %v, want %v", ids, want)
	}
	for _, id := range ids {
		m.Line(1, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{}}`))
	}
	for range 2 {
		<-out.done
	}
	got := map[string]bool{}
	for _, r := range out.replies {
		msg, _ := jsonrpc.Parse(r)
		got[string(msg.Bytes(msg.ID))] = !msg.IsError
	}
	if !got[`"a"`] || !got[`"b"`] {
		t.Fatalf("replies %v, want results for \"a\" and \"b\"", got)
	}
	// Out of range: the default.
	if m := New(Options{Name: "t", FirstID: MaxFirstID + 1}); m.nextID != 1 {
		t.Errorf("FirstID over MaxFirstID: first id %d, want 1", m.nextID)
		m.Close()
	} else {
		m.Close()
	}
}

// TestQueueBoundPerClient: behind maxInFlight, one session may queue at
// most maxQueuedPerClient requests; the next is refused at once.
func TestQueueBoundPerClient(t *testing.T) {
	m := New(Options{Name: "t", MaxInFlight: 1})
	defer m.Close()
	m.SetUpstream(testkit.Genless(&silent{m: m}))
	m.Started(1)
	out := &collect{done: make(chan struct{}, 1)}
	c := m.Join(out)
	for i := range maxQueuedPerClient + 2 { // one in flight, the queue full, one more
		msg, _ := jsonrpc.Parse(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call"}`, i))
		c.Handle(context.Background(), &msg, out)
	}
	<-out.done
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.replies) != 1 || !bytes.Contains(out.replies[0], []byte(`"id":1025`)) || !bytes.Contains(out.replies[0], []byte("too many requests")) {
		t.Fatalf("replies %q", out.replies)
	}
	if m.Pending() != maxQueuedPerClient+1 || m.Stats().QueueFull != 1 {
		t.Fatalf("pending %d, queue-full count %d", m.Pending(), m.Stats().QueueFull)
	}
}
