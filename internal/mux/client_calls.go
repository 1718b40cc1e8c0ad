package mux

// The calls a Client has in flight: its table of them by the client's raw
// id, and the queue of those waiting for an upstream slot (MaxInFlight),
// taken round-robin across clients. All of it is guarded by m.mu.

// lookupLocked returns the client's call in flight with raw id, or nil.
func (c *Client) lookupLocked(id []byte) *call {
	if k, ok := makeKey(id); ok {
		return c.calls[k]
	}
	return c.long[string(id)]
}

func (c *Client) addLocked(cl *call) {
	if cl.long != "" {
		if c.long == nil {
			c.long = map[string]*call{}
		}
		c.long[cl.long] = cl
	} else {
		c.calls[cl.key] = cl
	}
	if !cl.listen { // nothing but its subscription goes on a listen's stream
		c.latest = cl
	}
}

// each calls f for every call of the client in flight.
func (c *Client) eachLocked(f func(*call)) {
	for _, cl := range c.calls {
		f(cl)
	}
	for _, cl := range c.long {
		f(cl)
	}
}

// removeLocked forgets a call that left the pending table. Called with m.mu held.
func (c *Client) removeLocked(cl *call) {
	if cl.long != "" {
		if c.long[cl.long] == cl {
			delete(c.long, cl.long)
		}
	} else if c.calls[cl.key] == cl {
		delete(c.calls, cl.key)
	}
	if cl.queued {
		for i, q := range c.queue {
			if q == cl {
				c.queue = append(c.queue[:i], c.queue[i+1:]...)
				break
			}
		}
		cl.queued = false
	}
	if c.latest == cl {
		c.latest = nil
		c.eachLocked(func(other *call) {
			if !other.listen && (c.latest == nil || other.upID > c.latest.upID) {
				c.latest = other
			}
		})
	}
}

// dequeueLocked takes the next queued calls, round-robin across clients,
// while upstream slots are free. Called with m.mu held.
func (m *Mux) dequeueLocked() []job {
	var out []job
	for len(m.waiting) > 0 && (m.opts.MaxInFlight <= 0 || m.sending < m.opts.MaxInFlight) {
		c := m.waiting[0]
		m.waiting = m.waiting[1:]
		if len(c.queue) == 0 {
			continue
		}
		cl := c.queue[0]
		c.queue = c.queue[1:]
		cl.queued, cl.sent = false, true
		m.sending++
		m.wroteLocked(c)
		out = append(out, cl.job)
		cl.job = job{}
		if len(c.queue) > 0 {
			m.waiting = append(m.waiting, c)
		}
	}
	return out
}
