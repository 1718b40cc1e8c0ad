package cluster

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/session"
)

// This file keeps the resumable event streams of portable sessions, so
// that a client whose replica died resumes its stream on another one: per
// stream a Redis stream of its events (XADD with entry ids "0-<seq>", so
// that a Last-Event-ID's seq is a range start, trimmed with MAXLEN ~) and
// a hash of who wrote it, the ids of its requests ("r<i>") and the ids
// its final replies answered ("f<seq>"). The finals are counted apart
// from the events because trimming may drop the events, never the
// knowledge of which requests were answered. Both keys carry the
// session's hash tag and live for the ttl the front gives each write.
//
// Writes never wait on Redis: OpenStream and AppendEvent queue them
// (bounded by count and bytes, dropped and counted past either), and one
// goroutine of Run sends what is queued in one pipeline per round trip.

// Stream queue bounds: ops waiting, and the bytes of their events.
const (
	streamQueue      = 4096
	streamQueueBytes = 32 << 20
	// streamBatch bounds the writes sent in one pipeline.
	streamBatch = 128
)

// streamOp is one queued write.
type streamOp struct {
	sid      string
	stream   uint64
	requests [][]byte // OpenStream's; nil for an event
	ev       session.Event
	ttl      time.Duration
}

// streamStats counts what became of stream writes.
type streamStats struct {
	queuedBytes atomic.Int64
	dropped     atomic.Uint64 // with the queue full
	failed      atomic.Uint64 // in a batch Redis did not take whole (down, slow, refused)
}

// StreamDrops is how many stream writes were dropped with the queue full,
// and how many were sent in a batch Redis did not take whole.
func (c *Cluster) StreamDrops() (dropped, failed uint64) {
	return c.streams.dropped.Load(), c.streams.failed.Load()
}

// OpenStream records stream of session sid as resumable on every replica:
// this replica wrote it, and it carries the requests whose ids (raw JSON,
// byte for byte) are given. It only queues the write: false when it was
// dropped (no Redis, or the queue is full).
func (c *Cluster) OpenStream(sid string, stream uint64, requests [][]byte, ttl time.Duration) bool {
	if requests == nil {
		requests = [][]byte{}
	}
	return c.queueStream(streamOp{sid: sid, stream: stream, requests: requests, ttl: ttl})
}

// AppendEvent records event ev of stream of session sid (opened by
// OpenStream), and makes both of its keys live for ttl from now. It only
// queues the write: false when it was dropped. A final reply's id is read
// by the sender, off the caller's path.
func (c *Cluster) AppendEvent(sid string, stream uint64, ev session.Event, ttl time.Duration) bool {
	return c.queueStream(streamOp{sid: sid, stream: stream, ev: ev, ttl: ttl})
}

func (c *Cluster) queueStream(op streamOp) bool {
	if c.rdb == nil {
		return false
	}
	n := int64(len(op.ev.Data))
	if c.streams.queuedBytes.Add(n) > streamQueueBytes {
		c.streams.queuedBytes.Add(-n)
		c.streams.dropped.Add(1)
		return false
	}
	select {
	case c.streamOps <- op:
		return true
	default:
		c.streams.queuedBytes.Add(-n)
		c.streams.dropped.Add(1)
		return false
	}
}

// streamLoop sends the queued stream writes until ctx ends: what is queued
// when it wakes, up to streamBatch, in one pipeline.
func (c *Cluster) streamLoop(ctx context.Context) {
	batch := make([]streamOp, 0, streamBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case op := <-c.streamOps:
			batch = append(batch[:0], op)
		}
	more:
		for len(batch) < streamBatch {
			select {
			case op := <-c.streamOps:
				batch = append(batch, op)
			default:
				break more
			}
		}
		c.sendStreams(ctx, batch)
		clear(batch) // let the events' data go
	}
}

// sendStreams writes batch in one round trip.
func (c *Cluster) sendStreams(ctx context.Context, batch []streamOp) {
	var bytes int64
	for i := range batch {
		bytes += int64(len(batch[i].ev.Data))
	}
	defer c.streams.queuedBytes.Add(-bytes)
	err := c.call(ctx, func(ctx context.Context) error {
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range batch {
				c.pipeStream(ctx, p, &batch[i])
			}
			return nil
		})
		return err
	})
	if err != nil {
		// Some of the batch may have been written; a resume finds a gap
		// (or nothing) and answers what it cannot replay.
		c.streams.failed.Add(uint64(len(batch)))
	}
}

// pipeStream adds op's commands to p.
func (c *Cluster) pipeStream(ctx context.Context, p redis.Pipeliner, op *streamOp) {
	meta, events := c.keys.streamMeta(op.sid, op.stream), c.keys.streamEvents(op.sid, op.stream)
	if op.requests != nil {
		fields := make([]any, 0, 4+2*len(op.requests))
		fields = append(fields, "w", c.cfg.Instance, "a", c.cfg.Advertise)
		for i, id := range op.requests {
			fields = append(fields, "r"+strconv.Itoa(i), id)
		}
		p.HSet(ctx, meta, fields...)
		p.PExpire(ctx, meta, op.ttl)
		return
	}
	ev := &op.ev
	if ev.Final {
		var id []byte
		if ev.Data != nil {
			if m, err := jsonrpc.Parse(ev.Data); err == nil && m.ID.Present() {
				id = m.Bytes(m.ID)
			}
		}
		// An id of "" is a final without a message (cancelled); a reply
		// whose id does not parse is one too, as far as a resume can tell.
		p.HSet(ctx, meta, "f"+strconv.FormatUint(ev.Seq, 10), id)
	}
	if ev.Data != nil {
		values := []any{"d", ev.Data}
		if ev.Final {
			values = append(values, "f", "1")
		}
		p.XAdd(ctx, &redis.XAddArgs{
			Stream: events, ID: "0-" + strconv.FormatUint(ev.Seq, 10),
			MaxLen: int64(c.cfg.StreamEvents), Approx: true, Values: values,
		})
	}
	// Both keys, whatever this write touched: the last write's ttl (the
	// short grace once the stream is complete) holds for the stream.
	p.PExpire(ctx, meta, op.ttl)
	p.PExpire(ctx, events, op.ttl)
}

// Events returns what Redis keeps of stream of session sid: who wrote it,
// its requests and finals, and its events after seq since (at most about
// StreamEvents). nil and no error: Redis has no such stream.
func (c *Cluster) Events(ctx context.Context, sid string, stream, since uint64) (*session.Record, error) {
	var meta *redis.MapStringStringCmd
	var entries *redis.XMessageSliceCmd
	err := c.call(ctx, func(ctx context.Context) error {
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			meta = p.HGetAll(ctx, c.keys.streamMeta(sid, stream))
			start := "0-" + strconv.FormatUint(min(since, math.MaxUint64-1)+1, 10)
			entries = p.XRangeN(ctx, c.keys.streamEvents(sid, stream), start, "+", int64(2*c.cfg.StreamEvents))
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return parseRecord(meta.Val(), entries.Val(), since), nil
}

// parseRecord reads a stream's hash and entries; nil when the hash is
// empty or names no writer. Fields and entries it does not know are
// skipped: a newer replica may add some.
func parseRecord(meta map[string]string, entries []redis.XMessage, since uint64) *session.Record {
	if meta["w"] == "" {
		return nil
	}
	rec := &session.Record{Instance: meta["w"], Advertise: meta["a"], After: since}
	requests := map[int][]byte{}
	for k, v := range meta {
		switch {
		case len(k) > 1 && k[0] == 'r':
			if i, err := strconv.Atoi(k[1:]); err == nil && i >= 0 && i < len(meta) && strconv.Itoa(i) == k[1:] {
				requests[i] = []byte(v)
			}
		case len(k) > 1 && k[0] == 'f':
			if seq, err := strconv.ParseUint(k[1:], 10, 64); err == nil {
				f := session.Final{Seq: seq}
				if v != "" {
					f.ID = []byte(v)
				}
				rec.Finals = append(rec.Finals, f)
			}
		}
	}
	for i := range len(requests) {
		id, ok := requests[i]
		if !ok {
			break
		}
		rec.Requests = append(rec.Requests, id)
	}
	for _, e := range entries {
		ms, seqText, ok := strings.Cut(e.ID, "-")
		seq, err := strconv.ParseUint(seqText, 10, 64)
		data, isString := e.Values["d"].(string)
		if !ok || ms != "0" || err != nil || !isString || seq <= since {
			continue
		}
		_, final := e.Values["f"]
		rec.Events = append(rec.Events, session.Event{Seq: seq, Data: []byte(data), Final: final})
	}
	return rec
}
