package cluster

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/session"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A stream written by one replica is read back by another from a real
// Redis: its writer, its requests byte for byte, its finals, the events
// after the seq asked for, and both keys expiring with the ttl given.
func TestStreamRecordedAndReadBack(t *testing.T) {
	addr := testkit.Redis(t)
	a, _ := newCluster(t, "a", addr, nil)
	b, _ := newCluster(t, "b", addr, nil)
	run(t, a)
	ctx := context.Background()
	const sid, stream = "sid-1", 7<<32 + 1
	id := `12345678901234567890123`
	if !a.OpenStream(sid, stream, [][]byte{[]byte(id), []byte(`"x"`)}, time.Hour) {
		t.Fatal("OpenStream dropped")
	}
	a.AppendEvent(sid, stream, session.Event{Seq: 1, Data: []byte(`{"jsonrpc":"2.0","method":"notifications/progress"}`)}, time.Hour)
	a.AppendEvent(sid, stream, session.Event{Seq: 2, Data: []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`), Final: true}, time.Hour)
	a.AppendEvent(sid, stream, session.Event{Seq: 3, Final: true}, time.Minute) // cancelled: no message
	var rec *session.Record
	testkit.WaitFor(t, "the stream's writes in Redis", func() bool {
		var err error
		rec, err = b.Events(ctx, sid, stream, 1)
		return err == nil && rec != nil && len(rec.Finals) == 2
	})
	if rec.Instance != "a" || rec.Advertise != "a.test:8080" || len(rec.Requests) != 2 || string(rec.Requests[0]) != id || string(rec.Requests[1]) != `"x"` {
		t.Fatalf("record: %+v", rec)
	}
	if len(rec.Events) != 1 || rec.Events[0].Seq != 2 || !rec.Events[0].Final || rec.After != 1 {
		t.Fatalf("events after 1: %+v", rec.Events)
	}
	finals := map[uint64]string{}
	for _, f := range rec.Finals {
		finals[f.Seq] = string(f.ID)
	}
	if finals[2] != id || finals[3] != "" {
		t.Fatalf("finals: %v", finals)
	}
	if got := rec.Unanswered(); len(got) != 0 {
		t.Fatalf("unanswered: %q, want none (one replied, one cancelled)", got)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for _, key := range []string{a.keys.streamMeta(sid, stream), a.keys.streamEvents(sid, stream)} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("%s: ttl %v, want the last write's minute", key, ttl)
		}
	}
	if rec, err := b.Events(ctx, sid, stream+1, 0); rec != nil || err != nil {
		t.Errorf("an unknown stream: %+v %v, want nil", rec, err)
	}
	if d, f := a.StreamDrops(); d != 0 || f != 0 {
		t.Errorf("drops %d, failures %d", d, f)
	}
}

// The events of a long stream are trimmed to about StreamEvents; the
// knowledge of its final replies is not.
func TestStreamTrimmedKeepsFinals(t *testing.T) {
	addr := testkit.Redis(t)
	a, _ := newCluster(t, "a", addr, nil)
	run(t, a)
	const sid, stream, n = "sid-2", 1, 1000
	a.OpenStream(sid, stream, [][]byte{[]byte("1")}, time.Hour)
	a.AppendEvent(sid, stream, session.Event{Seq: 1, Data: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), Final: true}, time.Hour)
	for i := range n {
		a.AppendEvent(sid, stream, session.Event{Seq: uint64(2 + i), Data: []byte(`{"jsonrpc":"2.0","method":"notifications/message"}`)}, time.Hour)
	}
	var rec *session.Record
	testkit.WaitFor(t, "every write sent", func() bool {
		var err error
		rec, err = a.Events(context.Background(), sid, stream, 0)
		return err == nil && rec != nil && len(rec.Events) > 0 && rec.Events[len(rec.Events)-1].Seq == n+1
	})
	if len(rec.Events) >= n || len(rec.Events) < 512 {
		t.Fatalf("%d events kept of %d, want about 512", len(rec.Events), n+1)
	}
	if len(rec.Finals) != 1 || string(rec.Finals[0].ID) != "1" {
		t.Fatalf("finals %+v, want the trimmed reply's", rec.Finals)
	}
	if got := rec.Unanswered(); len(got) != 1 || string(got[0]) != "1" {
		t.Fatalf("unanswered %q: the reply a resume from 0 cannot replay is owed again", got)
	}
}

// Writes never wait: past the queue they are dropped and counted, and
// without Redis they are refused at once.
func TestStreamQueueBounded(t *testing.T) {
	m := miniredis.RunT(t)
	c, _ := newCluster(t, "a", m.Addr(), nil) // not running: nothing drains the queue
	for i := range streamQueue {
		if !c.AppendEvent("s", 1, session.Event{Seq: uint64(i + 1), Data: []byte("{}")}, time.Minute) {
			t.Fatalf("write %d dropped below the bound", i)
		}
	}
	if c.AppendEvent("s", 1, session.Event{Seq: streamQueue + 1, Data: []byte("{}")}, time.Minute) {
		t.Fatal("a write past the bound queued")
	}
	if d, _ := c.StreamDrops(); d != 1 {
		t.Fatalf("%d drops, want 1", d)
	}
	big, _ := newCluster(t, "b", m.Addr(), nil)
	if big.AppendEvent("s", 1, session.Event{Seq: 1, Data: make([]byte, streamQueueBytes+1)}, time.Minute) {
		t.Fatal("a write past the byte bound queued")
	}
	none, _ := newCluster(t, "c", "", nil)
	if none.OpenStream("s", 1, nil, time.Minute) {
		t.Fatal("a write queued without Redis")
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add("a", "r0", `"x"`, "f3", `"x"`, "0-3", "{}", true)
	f.Add("", "r1", "1", "f", "", "1-1", "", false)
	f.Add("w", "r-1", "", "fx", "1", "0-18446744073709551615", "d", true)
	f.Fuzz(func(t *testing.T, writer, k1, v1, k2, v2, entryID, data string, final bool) {
		meta := map[string]string{"w": writer, k1: v1, k2: v2}
		values := map[string]any{"d": data}
		if final {
			values["f"] = "1"
		}
		rec := parseRecord(meta, []redis.XMessage{{ID: entryID, Values: values}}, 2)
		if rec == nil {
			if meta["w"] != "" {
				t.Fatalf("a record with writer %q not read", meta["w"])
			}
			return
		}
		for _, ev := range rec.Events {
			if ev.Seq <= 2 {
				t.Fatalf("event %d returned after 2", ev.Seq)
			}
		}
		for i, id := range rec.Requests {
			if meta["r"+strconv.Itoa(i)] != string(id) {
				t.Fatalf("request %d: %q", i, id)
			}
		}
		_ = rec.Unanswered()
		_ = fmt.Sprint(rec)
	})
}
