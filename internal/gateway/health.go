package gateway

import (
	"encoding/json"
	"net/http"
)

// The probes an orchestrator asks: /healthz (the process serves HTTP) and
// /readyz (every critical server is ready, and every endpoint's critical
// members; 503 otherwise), with a JSON body naming each server's and
// endpoint's state, so that a failing probe says why.

// ServerReady is one server in /readyz.
type ServerReady struct {
	Ready    bool   `json:"ready"`
	State    string `json:"state"` // "ready", "starting", "backing off: ...", "per session" or "disabled"
	Critical bool   `json:"critical,omitempty"`
	// Disabled: "disabled": true in the config; not started, and no
	// reason to be unready (disabled.go).
	Disabled bool `json:"disabled,omitempty"`
}

// EndpointReady is one endpoint in /readyz.
type EndpointReady struct {
	Ready bool   `json:"ready"`
	State string `json:"state,omitempty"` // why not: the first critical member down
}

// ReadyReport is the body of /readyz.
type ReadyReport struct {
	Ready     bool                     `json:"ready"`
	Servers   map[string]ServerReady   `json:"servers"`
	Endpoints map[string]EndpointReady `json:"endpoints,omitempty"`
}

// Readiness reports whether the gateway is ready: every server marked
// critical is ready (a server whose processes are per session, or a
// remote, has no state of its own: it counts as ready), and so is every
// endpoint (its critical members).
func (g *Gateway) Readiness() ReadyReport {
	r := ReadyReport{Ready: true, Servers: map[string]ServerReady{}}
	cfg, srvs, endpoints := g.current() // a reload may swap them (reload.go)
	for name, s := range srvs {
		h := ServerReady{Ready: true, State: "per session", Critical: cfg.Servers[name].Critical}
		if !s.PerSession() {
			h.Ready, h.State = s.Ready()
			if h.Ready {
				h.State = "ready"
			}
		}
		if h.Critical && !h.Ready {
			r.Ready = false
		}
		r.Servers[name] = h
	}
	addDisabledReady(&r, cfg)
	if len(endpoints) > 0 {
		r.Endpoints = map[string]EndpointReady{}
	}
	for name, e := range endpoints {
		ok, why := e.Ready()
		r.Endpoints[name] = EndpointReady{Ready: ok, State: why}
		if !ok {
			r.Ready = false
		}
	}
	return r
}

// probes serves /healthz and /readyz.
func (g *Gateway) probes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := g.Readiness()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !rd.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rd)
	})
	return mux
}
