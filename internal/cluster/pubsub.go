package cluster

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/internal/session"
)

// This file is what every replica hears from the others, on one Redis
// subscription: revoked sessions (Revoke) and handoff states stored
// (SetState). Pub/sub delivers only to the replicas subscribed when a
// message is published: a replica whose link was down misses what was
// said meanwhile, so each (re)subscription is itself told (OnSubscribed),
// for the replica to catch up from the store.

// OnRevoke registers fn to be called with the id of every session revoked
// by any replica while Run runs. fn runs on Run's subscriber goroutine,
// one call at a time, and must not block.
func (c *Cluster) OnRevoke(fn func(sid string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onRevoke = append(c.onRevoke, fn)
}

// OnStateChange registers fn to be called with the session and version of
// every handoff state any replica stores while Run runs (a state that lost
// to a newer one is not told). fn runs on Run's subscriber goroutine, one
// call at a time, and must not block: it hands the work (State, then
// applying it) to a goroutine of its own.
func (c *Cluster) OnStateChange(fn func(sid string, v session.StateVersion)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onState = append(c.onState, fn)
}

// OnSubscribed registers fn to be called each time the subscription is in
// place: when Run starts, and after each loss of the link to Redis (a
// restart, a network fault), once subscribed again. What was published
// meanwhile was missed: fn catches up (from State). fn runs on the
// subscriber goroutine and must not block.
func (c *Cluster) OnSubscribed(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onSubscribed = append(c.onSubscribed, fn)
}

// subscribe hands the messages of the revocation and state channels to
// their callbacks until ctx ends. The client's subscription reconnects by
// itself after Redis comes back. Revocations published meanwhile are
// missed (the tombstone still refuses a resume); state changes too, which
// the OnSubscribed callbacks catch up on.
func (c *Cluster) subscribe(ctx context.Context) {
	revokes, states := c.keys.revokeChannel(), c.keys.stateChannel()
	ps := c.rdb.Subscribe(ctx, revokes, states)
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				// One per channel subscribed: the state channel's says
				// the link is (back) in place for state changes, and
				// that Redis answers: the callbacks' calls must not
				// fail at once for want of a heartbeat since.
				if m.Kind == "subscribe" && m.Channel == states {
					c.setHealth(healthUp, nil)
					for _, fn := range c.callbacks().subscribed {
						fn()
					}
				}
			case *redis.Message:
				switch m.Channel {
				case revokes:
					for _, fn := range c.callbacks().revoke {
						fn(m.Payload)
					}
				case states:
					sid, v, ok := parseStateChange(m.Payload)
					if !ok {
						continue
					}
					for _, fn := range c.callbacks().state {
						fn(sid, v)
					}
				}
			}
		}
	}
}

// callbackSet is a copy of the registered callbacks, taken under mu.
type callbackSet struct {
	revoke     []func(string)
	state      []func(string, session.StateVersion)
	subscribed []func()
}

func (c *Cluster) callbacks() callbackSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return callbackSet{c.onRevoke, c.onState, c.onSubscribed}
}

// stateChange is the message announcing version v of session sid's
// handoff state: "<N> <Tie> <sid>", the numbers in decimal, the id last
// (it may hold spaces).
func stateChange(sid string, v session.StateVersion) string {
	b := strconv.AppendUint(nil, v.N, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, v.Tie, 10)
	b = append(b, ' ')
	return string(append(b, sid...))
}

// parseStateChange reads a stateChange message; false for one that does
// not parse (a version or no id).
func parseStateChange(msg string) (sid string, v session.StateVersion, ok bool) {
	n, rest, ok1 := strings.Cut(msg, " ")
	tie, sid, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || sid == "" {
		return "", v, false
	}
	var err1, err2 error
	v.N, err1 = strconv.ParseUint(n, 10, 64)
	v.Tie, err2 = strconv.ParseUint(tie, 10, 64)
	if err1 != nil || err2 != nil {
		return "", session.StateVersion{}, false
	}
	return sid, v, true
}
