package stdio

import (
	"errors"
	"math/rand/v2"
	"time"
)

// supervise owns the process lifecycle after StartStdio: it waits for the
// running generation to end, restarts it with backoff when configured, and
// on Close stops the running process. It is the only caller of startProc
// after StartStdio, so generations never overlap. p is the first process,
// or nil when its start failed with spawnErr (only with Restart set).
func (s *Stdio) supervise(p *proc, spawnErr error) {
	defer s.wg.Done()
	defer close(s.done)
	failures := 0 // consecutive failed runs and failed spawns
	for {
		why := spawnErr
		if p != nil {
			select {
			case <-p.finished:
			case <-s.closing:
				p.stop()
				<-p.finished
				return
			}
			if !s.cfg.Restart || s.isClosed() {
				return
			}
			if goodRun(p, s.cfg.StableAfter) {
				failures = 0
			}
			why = p.exitErr
		}
		d := backoff(s.cfg.MinBackoff, s.cfg.MaxBackoff, failures, rand.Int64N)
		failures++
		s.h.Waiting(why, d)
		s.log.Info("upstream restarting", "after", d.Round(time.Millisecond), "attempt", failures)
		if !s.sleep(d) {
			return
		}
		np, err := s.startProc()
		if err != nil {
			s.spawnFailures.Add(1)
			s.log.Error("upstream start failed; will retry", "err", err)
			p, spawnErr = nil, err
			continue
		}
		if np.gen > 1 {
			s.restarts.Add(1)
		}
		p, spawnErr = np, nil
	}
}

// goodRun reports whether p's run ends a crash loop: it answered a request,
// or it stayed up stableAfter and exited on its own. One that died in
// initialize or on its first call keeps the delay growing, and so does one
// the gateway had to kill (Restart, the stuck rule) however long it was up:
// a server that hangs in initialize until the owner restarts it is looping.
func goodRun(p *proc, stableAfter time.Duration) bool {
	if p.served.Load() {
		return true
	}
	var ee *ExitError
	killed := errors.As(p.exitErr, &ee) && ee.Reason != ""
	return !killed && p.exitedAt.Sub(p.started) >= stableAfter
}

// sleep waits d, or returns false at once when Close is called.
func (s *Stdio) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closing:
		return false
	}
}

// backoff returns the delay before the restart that follows n consecutive
// failures: d = min(lo*2^n, hi), then a uniformly random point of [d/2, d]
// drawn with randN (rand.Int64N in production).
func backoff(lo, hi time.Duration, n int, randN func(int64) int64) time.Duration {
	d := hi
	if n < 62 && lo <= hi>>n {
		d = min(lo<<n, hi)
	}
	half := d / 2
	if d-half <= 0 {
		return d
	}
	return half + time.Duration(randN(int64(d-half)+1))
}
