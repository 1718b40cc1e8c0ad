package aggregate

import (
	"bytes"
	"context"
	"sync"

	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file fans a client's logging level out to its members: at
// logging/setLevel, and to each member that comes up later.

// setLevel sends the client's logging/setLevel to every member up that
// logs, and answers when all have answered. Members that come up later
// get it then.
func (c *clientSession) setLevel(ctx context.Context, p *pending, params []byte) {
	c.mu.Lock()
	c.level = params
	var to []*member
	for i, mc := range c.members {
		if c.visibleLocked(i) && mc.caps&capLogging != 0 {
			mc.level = params
			to = append(to, mc)
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	ok := 0
	for _, mc := range to {
		wg.Go(func() {
			mctx, cancel := c.memberCtxOf(ctx, mc)
			defer cancel()
			_, err := c.callMember(mctx, mc, protocol.MethodLoggingSetLevel, params)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				ok++
			}
		})
	}
	wg.Wait()
	if ok == 0 && len(errs) > 0 {
		c.fail(p, errs[0]) // an invalid level, most likely: every member said so
		return
	}
	c.answer(p, []byte(`{}`))
}

// applyLevelLocked sends the client's logging level to member mc if it
// has not had it: it came up, or back, after the client's
// logging/setLevel. Called with c.mu held.
func (c *clientSession) applyLevelLocked(mc *member) {
	if c.closed || c.level == nil || mc.caps&capLogging == 0 || bytes.Equal(mc.level, c.level) {
		return
	}
	mc.level = c.level
	level := c.level
	go func() {
		ctx, cancel := c.memberCtxOf(c.ctx, mc)
		defer cancel()
		if _, err := c.callMember(ctx, mc, protocol.MethodLoggingSetLevel, level); err != nil {
			c.e.log.Debug("logging level not set on a member that came up", "server", mc.m.Name, "err", err)
		}
	}()
}
