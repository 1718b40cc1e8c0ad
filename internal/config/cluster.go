package config

import (
	"encoding/json"
	"net"
	"net/url"
	"time"
)

// This file holds the "gateway.cluster" block: this replica's place among
// several serving the same sessions (docs/deployment.md, "Running more
// than one replica").

// Cluster is the "gateway.cluster" block. Without it the gateway is one
// replica, and its sessions live only in it.
type Cluster struct {
	// Instance names this replica's process life (key "instance"): a
	// restarted replica has lost its sessions, so it must come back under
	// a new name. Default "": the host name and a random suffix, new on
	// every start.
	Instance string
	// Advertise is the host:port where the other replicas reach this
	// one's listener (key "advertise"; the pod IP and the port). Required.
	Advertise string
	// Redis is the store of what cannot be sealed (key "redis"); nil:
	// none (sealed sessions only; limits per replica).
	Redis *Redis
	// Heartbeat is how often this replica tells Redis it lives (key
	// "heartbeat"); it is gone after three missed beats. Default 1s.
	Heartbeat time.Duration
	// SessionMaxAge is the absolute expiry sealed into every session id
	// (key "sessionMaxAge"): past it no replica opens the id. Default 24h.
	SessionMaxAge time.Duration
}

// Redis is the "gateway.cluster.redis" block.
type Redis struct {
	// URL is a redis:// or rediss:// URL (key "url"). Required.
	URL string
	// Password, when set, is used instead of the URL's (key "password";
	// "${MCPGATE_REDIS_PASSWORD}", say).
	Password string
}

// String names the Redis server without its password.
func (r Redis) String() string {
	u, err := url.Parse(r.URL)
	if err != nil {
		return "redis (unparsable url)"
	}
	u.User = nil
	return u.Redacted()
}

// GoString is String: a Redis formatted with %#v shows no password.
func (r Redis) GoString() string { return r.String() }

// Cluster defaults.
const (
	DefaultHeartbeat     = time.Second
	DefaultSessionMaxAge = 24 * time.Hour
)

// cluster decodes the "gateway.cluster" block.
func (d *decoder) cluster(path string, raw json.RawMessage, dst **Cluster) {
	c := &Cluster{Heartbeat: DefaultHeartbeat, SessionMaxAge: DefaultSessionMaxAge}
	d.fields(path, raw, "an object", func(key, p string, v json.RawMessage) bool {
		switch key {
		case "instance":
			d.str(p, v, &c.Instance, true)
		case "advertise":
			d.str(p, v, &c.Advertise, true)
		case "redis":
			r := &Redis{}
			d.fields(p, v, "an object", func(key, p string, v json.RawMessage) bool {
				switch key {
				case "url":
					d.str(p, v, &r.URL, true)
				case "password":
					d.str(p, v, &r.Password, true)
				default:
					return false
				}
				return true
			})
			c.Redis = r
		case "heartbeat":
			d.duration(p, v, &c.Heartbeat)
		case "sessionMaxAge":
			d.duration(p, v, &c.SessionMaxAge)
		default:
			return false
		}
		return true
	})
	*dst = c
}

// checkCluster checks the cluster block, naming each bad field.
func (g *Gateway) checkCluster(ps *Problems, path string) {
	c := g.Cluster
	if c == nil {
		return
	}
	p := join(path, "cluster")
	if c.Advertise == "" {
		ps.add(join(p, "advertise"), `is required: the host:port the other replicas reach this one at (e.g. "${POD_IP}:8080")`)
	} else if host, port, err := net.SplitHostPort(c.Advertise); err != nil || host == "" || port == "" || port == "0" || CheckListen(c.Advertise) != nil {
		ps.add(join(p, "advertise"), "%q is not host:port with a host and a port other replicas can dial", c.Advertise)
	}
	if len(c.Instance) > 128 {
		ps.add(join(p, "instance"), "is longer than 128 bytes")
	}
	if c.Heartbeat <= 0 {
		ps.add(join(p, "heartbeat"), "must be positive")
	}
	if c.SessionMaxAge < time.Minute {
		ps.add(join(p, "sessionMaxAge"), "must be at least 1m")
	}
	if r := c.Redis; r != nil {
		u, err := url.Parse(r.URL)
		switch {
		case r.URL == "":
			ps.add(join(join(p, "redis"), "url"), `is required (e.g. "redis://redis:6379/0")`)
		case err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "":
			ps.add(join(join(p, "redis"), "url"), "%q is not a redis:// or rediss:// URL with a host", r.String())
		}
	}
	if g.TLS != nil {
		// A replica forwards a request for a session another holds to that
		// one's advertise address in plain HTTP, which a TLS listener
		// answers 400: every such request would fail.
		ps.add(p, "is not with gateway.tls: the replicas forward to each other in plain HTTP; terminate TLS in front of them (an Ingress or a load balancer)")
	}
	if len(g.SealKeys) == 0 {
		ps.add(p, `needs seal keys shared by every replica ("sealKeys" or "sealKeyFile"): a random key's session ids open on no other replica`)
	}
}
