package servers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file is what an administrator sees of a Server (the gateway's admin
// API): its process, its tools, and restarting it. Nothing here is on a
// client request's path.

// ErrNoProcess is returned by Restart and Tools for a server without a
// process of its own: its processes are per session (isolation
// "session"), or it is a remote (see Server).
var ErrNoProcess = errors.New("the server has no shared process: each session has its own (restarting it would restart nothing shared)")

// Info is a Server's state as the admin API reports it.
type Info struct {
	// PID is the shared process's id (0 when it is not running, or the
	// server has none).
	PID int
	// Restarts counts the shared process's starts after the first.
	Restarts uint64
	// LastExit says why the shared process last exited when the gateway did
	// not ask it to ("" for none).
	LastExit string
	// Stderr holds its last stderr lines (at most 20), oldest first:
	// the server's words, untrusted.
	Stderr []string
	// Processes counts the processes (or upstream sessions) that sessions
	// own, for a server whose processes are per session.
	Processes int
	// Pending is the requests in flight upstream.
	Pending int
	// Pool is each process of a shared server with "processes" above 1
	// (PID, Restarts, LastExit and Stderr above are its first's); nil
	// otherwise.
	Pool []ProcessInfo
}

// ProcessInfo is one process of a shared server's pool.
type ProcessInfo struct {
	PID      int    // 0 when it is not running
	State    string // "ready", or Ready's words: "starting", "backing off: ..."
	Restarts uint64 // its starts after the first
	LastExit string // why it last exited when the gateway did not ask it to
	Sessions int    // sessions pinned to it (0 for a 2026-07-28 server's)
	Pending  int    // its requests in flight
	Counters Counters
}

// servingProcs returns the processes that serve the sessions (see
// Ready): the sessions' pool, or the 2026-07-28 processes when sessions
// take the reverse bridge; nil when closed or none runs.
func (s *shared) servingProcs() []*proc {
	s.mu.Lock()
	closed, reverse, modern := s.closed, s.reverse, s.modern
	s.mu.Unlock()
	switch {
	case closed:
		return nil
	case s.p != nil && !reverse:
		return s.sessionsProcs()
	}
	return modern
}

// Info implements Server.
func (s *shared) Info() Info {
	in := Info{Pending: s.Pending()}
	procs := s.servingProcs()
	if len(procs) > 0 && procs[0].st != nil {
		st := procs[0].st
		in.PID, in.Restarts, in.LastExit, in.Stderr = st.PID(), st.Stats().Restarts, st.LastExit(), st.RecentStderr()
	}
	if len(procs) > 1 {
		var sessions []int
		if s.pool != nil && len(procs) == len(s.pool.procs) && procs[0] == s.p {
			sessions = s.pool.counts()
		}
		for i, p := range procs {
			pi := ProcessInfo{Pending: p.m.Pending(), Counters: Counters{Mux: p.m.Stats()}}
			if ready, text := stateText(p.m.State()); ready {
				pi.State = "ready"
			} else {
				pi.State = text
			}
			if p.st != nil {
				pi.PID, pi.Restarts, pi.LastExit = p.st.PID(), p.st.Stats().Restarts, p.st.LastExit()
				pi.Counters.Restarts = pi.Restarts
			}
			if sessions != nil {
				pi.Sessions = sessions[i]
			}
			in.Pool = append(in.Pool, pi)
		}
	}
	return in
}

// Restart implements Server: every process that serves the sessions that
// is running now is restarted (each fails only its own requests).
func (s *shared) Restart(reason string) error {
	procs := s.servingProcs()
	if len(procs) == 0 || procs[0].st == nil {
		return ErrNoProcess
	}
	restarted := 0
	for _, p := range procs {
		if gen, running := p.st.Generation(); running {
			p.st.Restart(gen, reason)
			restarted++
		}
	}
	if restarted == 0 {
		return errors.New("the process is not running now (it is starting or backing off)")
	}
	return nil
}

// Tools implements Server: the sessions' process is asked as a session
// of the older eras would ask it (initialize answered by the mux).
func (s *shared) Tools(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	p := s.p
	if s.closed || s.reverse {
		p = nil
	}
	s.mu.Unlock()
	if p == nil {
		// A 2026-07-28 server's process: asking it takes a stateless
		// request; not worth it for a status page.
		return nil, errors.New("not listed for a server that speaks 2026-07-28 alone")
	}
	out := &adminReplies{ch: make(chan []byte, 1)}
	c := p.m.Join(discard{})
	defer c.Close()
	call := func(method string, params []byte) (json.RawMessage, error) {
		msg, err := jsonrpc.Parse(jsonrpc.Request([]byte(strconv.Itoa(out.next())), method, params))
		if err != nil {
			return nil, err
		}
		c.Handle(ctx, &msg, out)
		select {
		case b := <-out.ch:
			var r struct {
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				return nil, err
			}
			if r.Error != nil {
				return nil, fmt.Errorf("%s: %s", method, r.Error.Message)
			}
			return r.Result, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if _, err := call(protocol.MethodInitialize, []byte(`{"protocolVersion":"`+protocol.Version20250618+`","capabilities":{},"clientInfo":{"name":"mcpgate-admin","version":"1"}}`)); err != nil {
		return nil, err
	}
	msg, _ := jsonrpc.Parse(jsonrpc.Notification(protocol.NotificationInitialized, nil))
	c.Handle(ctx, &msg, discard{})
	var names []string
	cursor := ""
	for range 20 { // pages: bounded, whatever the server says
		params := []byte(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := call(protocol.MethodToolsList, params)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range page.Tools {
			names = append(names, t.Name)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	return names, nil
}

// adminReplies is the stream of the admin's own calls: one at a time.
type adminReplies struct {
	mu sync.Mutex
	id int // guarded by mu
	ch chan []byte
}

func (r *adminReplies) next() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id++
	return r.id
}

func (r *adminReplies) Send([]byte) {}

func (r *adminReplies) Reply(msg []byte) {
	if msg == nil {
		msg = []byte(`{"error":{"message":"cancelled"}}`)
	}
	select {
	case r.ch <- msg:
	default: // one call at a time: never a second reply
	}
}

// Info implements Server: the processes sessions own.
func (s *isolated) Info() Info {
	s.mu.Lock()
	n := len(s.live)
	s.mu.Unlock()
	return Info{Processes: n, Pending: s.Pending()}
}

// Restart implements Server: there is no shared process.
func (s *isolated) Restart(string) error { return ErrNoProcess }

// Tools implements Server: there is no shared process to ask.
func (s *isolated) Tools(context.Context) ([]string, error) { return nil, ErrNoProcess }
