package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"time"
)

// This file is the audit log's one writer goroutine (Auditor.run) and its
// queue. It never fails silently and never stays failed:
//
//   - Lines are written in batches (what is queued, up to auditBatch
//     bytes) with one Write each, with no buffered writer in between: a
//     bufio.Writer keeps its first error and refuses every later write,
//     so one full disk would end the log for good.
//   - A failed Write loses the lines it did not write whole: they are
//     counted (WriteStats), the error is logged (one line per
//     errorEvery, with the number held back), and the next batch is
//     tried as if nothing happened. When one goes through, it starts with
//     {"time":...,"dropped":N}: the lines missing before it, dropped from
//     a full queue or lost to failed writes.
//   - A write that stopped inside a line (a disk filling up mid-write)
//     leaves that partial line in the file: the next batch starts with a
//     newline so that every complete line stays one JSON object.
//
// Reopening a rotated file is the writer's (internal/logfile), checked
// before each batch's Write.

// auditBatch bounds the bytes of one Write.
const auditBatch = 64 << 10

// errorEvery is how often a failing audit log is logged: a full disk
// fails every batch.
const errorEvery = 10 * time.Second

// Dropped returns how many lines were dropped because the queue was full.
func (a *Auditor) Dropped() int64 { return a.dropped.Load() }

// WriteStats are the failed writes of an audit log.
type WriteStats struct {
	Errors int64 // writes that failed
	Lost   int64 // lines they lost
}

// WriteStats returns the failed writes so far.
func (a *Auditor) WriteStats() WriteStats {
	return WriteStats{Errors: a.writeErrors.Load(), Lost: a.lost.Load()}
}

// Close writes the lines queued and stops; lines logged after are
// dropped.
func (a *Auditor) Close() {
	a.closeOnce.Do(func() { close(a.lines) })
	<-a.done
}

// log queues one line, or drops it when the queue is full.
func (a *Auditor) log(line []byte) {
	defer func() {
		// Logged after Close: dropped.
		if recover() != nil {
			a.dropped.Add(1)
		}
	}()
	select {
	case a.lines <- line:
	default:
		a.dropped.Add(1)
	}
}

// run writes the queued lines to w until Close.
func (a *Auditor) run(w io.Writer) {
	defer close(a.done)
	var (
		batch    []byte
		reported int64 // lines missing that a "dropped" line told
		midLine  bool  // a failed write ended inside a line
		failing  bool  // the last write failed
	)
	for line := range a.lines {
		batch = batch[:0]
		if midLine {
			batch = append(batch, '\n')
		}
		missing := a.dropped.Load() + a.lost.Load()
		if missing > reported {
			batch = a.appendDropped(batch, missing-reported)
		}
		head := len(batch) // what precedes the audit lines
		batch = append(batch, line...)
		batch, open := a.fill(batch)
		n, err := w.Write(batch)
		if err == nil && n < len(batch) {
			err = io.ErrShortWrite
		}
		if err == nil {
			if failing {
				a.logger.Info("audit log writing again", "file", a.name, "lost_lines", a.lost.Load())
			}
			reported, midLine, failing = missing, false, false
		} else {
			if n >= head {
				reported = missing
			}
			lost := int64(bytes.Count(batch[max(n, head):], []byte{'\n'}))
			a.lost.Add(lost)
			a.writeErrors.Add(1)
			if n > 0 {
				midLine = batch[n-1] != '\n'
			}
			failing = true
			if ok, held := a.errLog.Allow(a.now()); ok {
				a.logger.Error("audit log write failed; its lines are lost and counted",
					"file", a.name, "err", err, "lines", lost, "failures_held_back", held)
			}
		}
		if cap(batch) > 4*auditBatch {
			batch = nil // a line of huge arguments: its room is not kept
		}
		if !open {
			return
		}
	}
}

// fill appends the lines queued to batch, up to auditBatch bytes; open is
// false once the queue is closed and empty.
func (a *Auditor) fill(batch []byte) (_ []byte, open bool) {
	for len(batch) < auditBatch {
		select {
		case line, ok := <-a.lines:
			if !ok {
				return batch, false
			}
			batch = append(batch, line...)
		default:
			return batch, true
		}
	}
	return batch, true
}

// appendDropped appends the line telling that n lines are missing.
func (a *Auditor) appendDropped(batch []byte, n int64) []byte {
	b, _ := json.Marshal(struct {
		Time    string `json:"time"`
		Dropped int64  `json:"dropped"`
	}{a.now().UTC().Format(time.RFC3339Nano), n})
	return append(append(batch, b...), '\n')
}
