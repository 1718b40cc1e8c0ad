package mux

import (
	"errors"
	"time"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// probe is the optional liveness check of generation gen (Options.PingInterval):
// every interval while gen is Ready it sends the gateway's own ping (a
// Modern Mux: server/discover); no
// answer within min(PingInterval, 30s), or an error answer other than
// "method not found", restarts the process through the upstream's Restart
// (an upstream that cannot restart is probed on). It runs on gen's init
// goroutine and returns when gen is gone (checked each interval), the
// probe failed, or the Mux closes.
func (m *Mux) probe(gen uint64) {
	t := time.NewTicker(m.opts.PingInterval)
	defer t.Stop()
	wait := min(m.opts.PingInterval, maxPingWait)
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		current := m.gen == gen && m.running
		ready := current && m.readyLocked()
		restarter := m.restarterLocked()
		m.mu.Unlock()
		if !current {
			return
		}
		if !ready {
			continue
		}
		method, params := protocol.MethodPing, []byte(nil)
		if m.mode == modeModern { // 2026-07-28 has no ping; discover is as cheap
			method, params = protocol.MethodServerDiscover, m.discoverParams()
		}
		_, err := m.roundTrip(gen, method, params, wait)
		var re *rpcError
		if err == nil || errors.Is(err, errClosed) || errors.Is(err, errExited) ||
			(errors.As(err, &re) && re.Code == protocol.CodeMethodNotFound) {
			continue
		}
		m.stats.livenessFailures.Add(1)
		m.log.Warn("liveness ping failed; restarting the server", "gen", gen, "err", err)
		if restarter != nil {
			reason := "liveness ping timed out"
			if re != nil {
				reason = "liveness ping failed: " + re.Error()
			}
			restarter.Restart(gen, reason)
			return
		}
	}
}
