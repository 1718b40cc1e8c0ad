package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Summary is the body of GET /admin/summary.
type Summary struct {
	Version       string    `json:"version"`
	Time          time.Time `json:"time"`
	UptimeSeconds float64   `json:"uptimeSeconds"`
	// RequestsTotal counts requests to servers and endpoints since the
	// start (refused ones included): a rate is its difference over time.
	RequestsTotal uint64 `json:"requestsTotal"`
	Servers       int    `json:"servers"`
	ServersReady  int    `json:"serversReady"`
	Sessions      int    `json:"sessions"`
	// Cluster says which replica answers; absent with one replica.
	Cluster *Cluster `json:"cluster,omitempty"`
	// AuthServer: the gateway runs its own authorization server, whose
	// clients and grants /admin/oauth/ lists.
	AuthServer bool `json:"authServer,omitempty"`
}

func (h *Handler) summary(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	servers := h.cfg.Source.Servers()
	s := Summary{
		Version: h.cfg.Version, Time: now.UTC(), UptimeSeconds: now.Sub(h.start).Seconds(),
		RequestsTotal: h.cfg.Source.RequestsTotal(), Servers: len(servers),
		Sessions: len(h.cfg.Source.Sessions(now)), Cluster: h.cfg.Source.Cluster(),
		AuthServer: h.cfg.AuthServer != nil,
	}
	for _, sv := range servers {
		if sv.Ready {
			s.ServersReady++
		}
	}
	writeJSON(w, http.StatusOK, s)
}

// servers answers {"servers": [...]}, by name, each with its tools (asked
// in parallel, each bounded by ToolsTimeout, reused for ToolsTTL).
func (h *Handler) servers(w http.ResponseWriter, r *http.Request) {
	list := h.cfg.Source.Servers()
	slices.SortFunc(list, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	var wg sync.WaitGroup
	for i := range list {
		s := &list[i]
		if s.Stderr == nil {
			s.Stderr = []string{}
		}
		if !s.Ready || s.PID == 0 {
			continue // nothing to ask, or a process per session
		}
		wg.Go(func() { s.Tools, s.ToolsError = h.toolsOf(r.Context(), s.Name, s.PID) })
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, map[string]any{"servers": list})
}

func (h *Handler) restart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := h.cfg.Source.Restart(name, "restarted by an administrator")
	switch {
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, errorBody("no server "+quote(name)))
	case errors.Is(err, ErrNoProcess):
		writeJSON(w, http.StatusConflict, errorBody("server "+quote(name)+
			" has no shared process: each session has its own (isolation \"session\", or a remote), so a restart would restart nothing shared; end its sessions instead"))
	case err != nil:
		writeJSON(w, http.StatusConflict, errorBody("server "+quote(name)+": "+err.Error()))
	default:
		h.tools.forget(name)
		h.cfg.Logger.Info("server restarted by an administrator", "server", name)
		writeJSON(w, http.StatusAccepted, map[string]string{"restarting": name})
	}
}

// sessions answers {"sessions": [...]}, oldest first.
func (h *Handler) sessions(w http.ResponseWriter, r *http.Request) {
	list := h.cfg.Source.Sessions(time.Now())
	slices.SortFunc(list, func(a, b Session) int { return a.Opened.Compare(b.Opened) })
	writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
}

func (h *Handler) endSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s, err := h.cfg.Source.EndSession(r, id)
	switch {
	case errors.Is(err, ErrNotFound):
		msg := "no live session has that id or id prefix"
		if h.cfg.Source.Cluster() != nil {
			msg = "no live session has that id, nor this replica's an id with that prefix (a session of another replica needs its whole id)"
		}
		writeJSON(w, http.StatusNotFound, errorBody(msg))
	case errors.Is(err, ErrOwnerGone):
		writeJSON(w, http.StatusNotFound, errorBody(err.Error()))
	case errors.Is(err, ErrOwnerUnreachable):
		writeJSON(w, http.StatusBadGateway, errorBody(err.Error()))
	case errors.Is(err, ErrAmbiguous):
		writeJSON(w, http.StatusConflict, errorBody(err.Error()))
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, errorBody(err.Error()))
	default:
		h.cfg.Logger.Info("session ended by an administrator", "session", s.ID, "target", s.Target, "endedOn", s.EndedOn)
		writeJSON(w, http.StatusOK, map[string]any{"ended": s})
	}
}

// errorTTL is how long a failure to get a server's tools is reused.
const errorTTL = 5 * time.Second

// toolsCache keeps each server's tool names for ToolsTTL, per process.
type toolsCache struct {
	mu sync.Mutex
	// guarded by mu:
	entries map[string]*toolsEntry
}

type toolsEntry struct {
	pid   int
	at    time.Time
	names []string
	err   string
	// asking is closed when the running ask ends; nil when none runs.
	asking chan struct{}
}

func (c *toolsCache) forget(server string) {
	c.mu.Lock()
	delete(c.entries, server)
	c.mu.Unlock()
}

// toolsOf returns server's tool names while process pid runs: cached, or
// asked (one ask per server at a time; others wait for it, bounded by
// ctx).
func (h *Handler) toolsOf(ctx context.Context, server string, pid int) ([]string, string) {
	c := &h.tools
	c.mu.Lock()
	for {
		e := c.entries[server]
		if e == nil || e.pid != pid {
			break
		}
		if e.asking == nil {
			ttl := h.cfg.ToolsTTL
			if e.err != "" {
				ttl = min(ttl, errorTTL) // a server just restarted answers soon
			}
			if time.Since(e.at) >= ttl {
				break
			}
			names, why := e.names, e.err
			c.mu.Unlock()
			return names, why
		}
		wait := e.asking
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, "not known yet"
		}
		c.mu.Lock()
	}
	e := &toolsEntry{pid: pid, asking: make(chan struct{})}
	c.entries[server] = e
	c.mu.Unlock()

	actx, cancel := context.WithTimeout(ctx, h.cfg.ToolsTimeout)
	names, err := h.cfg.Source.Tools(actx, server)
	cancel()
	why := ""
	if err != nil {
		why = err.Error()
		names = nil
	} else if names == nil {
		names = []string{}
	}
	c.mu.Lock()
	e.names, e.err, e.at = names, why, time.Now()
	close(e.asking)
	e.asking = nil
	c.mu.Unlock()
	return names, why
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func errorBody(msg string) map[string]string { return map[string]string{"error": msg} }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
