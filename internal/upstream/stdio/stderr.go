package stdio

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// stderrMaxLine bounds a logged stderr line; the rest is cut.
const stderrMaxLine = OversizedPrefixLen

// stderrBufSize is the stderr reader's buffer: logged lines are cut at
// stderrMaxLine anyway, so a bigger one would only cost every process
// memory (session mode runs hundreds).
const stderrBufSize = 4 << 10

// stderrLineCost is what one logged stderr line costs of the budget on top
// of its text: about what its log record adds (time, level, server, stream,
// pid). Without it a flood of one-byte lines would get StderrBytesPerSec
// records a second through.
const stderrLineCost = 100

// The stderr tail kept for ExitError: the last stderrTailLines lines, each
// cut to stderrTailBytes, out of a window of the last stderrCauseLines that
// CauseLine looks through (a Node stack trace runs a dozen lines past the
// one that names its cause).
const (
	stderrTailLines  = 5
	stderrCauseLines = 32
	stderrTailBytes  = 200
)

// stderrTail is a ring of the last stderr lines. Buffers are reused, so a
// flood of stderr costs no allocation per line. Not safe for concurrent use:
// the stderr logger writes it, the reader reads it after errDone.
type stderrTail struct {
	buf  [stderrCauseLines][]byte
	next int // slot of the next line
	n    int // lines kept
}

func (t *stderrTail) add(line []byte) {
	line = line[:min(len(line), stderrTailBytes)]
	t.buf[t.next] = append(t.buf[t.next][:0], line...)
	t.next = (t.next + 1) % stderrCauseLines
	t.n = min(t.n+1, stderrCauseLines)
}

// lines returns the last stderrTailLines kept lines, oldest first.
func (t *stderrTail) lines() []string { return t.last(stderrTailLines) }

// cause returns the kept line that says why the process failed (CauseLine
// over the whole window), or "".
func (t *stderrTail) cause() string { return CauseLine(t.last(stderrCauseLines)) }

// last returns the last n kept lines, oldest first, as valid UTF-8 (a cut
// may have split a character).
func (t *stderrTail) last(n int) []string {
	n = min(n, t.n)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := range n {
		b := t.buf[(t.next-n+i+stderrCauseLines)%stderrCauseLines]
		out = append(out, strings.ToValidUTF8(string(b), "\uFFFD"))
	}
	return out
}

// stderrLoop reads stderr to its end, keeps its tail for the ExitError and
// logs each line, at the level it names (stderr_level.go) or StderrLevel,
// within the StderrBytesPerSec budget (a line costs its length plus
// stderrLineCost). Lines over the
// budget are read all the same (the child must never block on stderr),
// counted, and summarised once per second in which any was dropped.
func (p *proc) stderrLoop() {
	s := p.s
	defer s.wg.Done()
	defer close(p.errDone)
	budget := s.cfg.StderrBytesPerSec
	var (
		windowEnd                time.Time
		left                     int   // bytes still loggable in this window
		droppedLines, droppedLen int64 // not logged in this window
	)
	summarise := func() {
		if droppedLines == 0 {
			return
		}
		s.log.Warn(fmt.Sprintf("stderr: %d bytes in %d lines not logged", droppedLen, droppedLines),
			"pid", p.pid, "stream", "stderr", "bytes_per_sec", budget)
		droppedLines, droppedLen = 0, 0
	}
	defer summarise()
	lr := newLineReader(p.stderr, stderrBufSize, stderrMaxLine)
	for {
		line, size, over, err := lr.next()
		if err != nil {
			return
		}
		p.tail.add(line)
		s.recent.addLine(line)
		if now := time.Now(); now.After(windowEnd) {
			summarise()
			windowEnd, left = now.Add(time.Second), budget
		}
		// The first line of a second is always logged, so that a budget
		// below stderrLineCost still shows something.
		cost := len(line) + stderrLineCost
		if cost > left && left < budget {
			droppedLines++
			droppedLen += int64(size)
			s.stderrDroppedLines.Add(1)
			s.stderrDroppedBytes.Add(uint64(size))
			continue
		}
		// A line below the log level is not logged, so it costs nothing.
		level := stderrLevel(line, s.cfg.StderrLevel)
		if !s.log.Enabled(context.Background(), level) {
			continue
		}
		left = max(left-cost, 0)
		attrs := []slog.Attr{slog.String("stream", "stderr"), slog.Int("pid", p.pid)}
		if over {
			attrs = append(attrs, slog.Int("truncated_from", size))
		}
		s.log.LogAttrs(context.Background(), level, string(line), attrs...)
	}
}
