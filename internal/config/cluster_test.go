package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// clusterConfig is a config with one seal key and the given cluster block.
func clusterConfig(cluster string) string {
	return sealConfig(`"sealKeys": [{"id": "k1", "key": "` + sealSecret(1) + `"}], "cluster": ` + cluster)
}

func TestClusterParse(t *testing.T) {
	env := map[string]string{"POD_IP": "10.1.2.3", "POD_UID": "uid-7", "PW": "s3cret-pw"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := Parse([]byte(clusterConfig(`{"instance": "${POD_UID}", "advertise": "${POD_IP}:8080",
	  "redis": {"url": "redis://:urlpw@redis.example:6379/0", "password": "${PW}"},
	  "heartbeat": "2s", "sessionMaxAge": "12h"}`)), lookup)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Gateway.Cluster
	if c == nil || c.Instance != "uid-7" || c.Advertise != "10.1.2.3:8080" || c.Heartbeat != 2*time.Second ||
		c.SessionMaxAge != 12*time.Hour || c.Redis == nil || c.Redis.URL != "redis://:urlpw@redis.example:6379/0" || c.Redis.Password != "s3cret-pw" {
		t.Fatalf("cluster: %+v", c)
	}
	for _, text := range []string{fmt.Sprint(*c.Redis), fmt.Sprintf("%#v %+v", *c.Redis, c)} {
		if strings.Contains(text, "s3cret-pw") || strings.Contains(text, "urlpw") {
			t.Errorf("formatted config shows a Redis password: %s", text)
		}
	}

	// Defaults: no Redis, 1s beats, 24h ids.
	cfg, err = Parse([]byte(clusterConfig(`{"advertise": "gw-0.peers:8080"}`)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Gateway.Cluster; c.Redis != nil || c.Heartbeat != DefaultHeartbeat || c.SessionMaxAge != DefaultSessionMaxAge || c.Instance != "" {
		t.Fatalf("defaults: %+v", c)
	}
	// Absent: one replica.
	if cfg, err := Parse([]byte(sealConfig(``)), nil); err != nil || cfg.Gateway.Cluster != nil {
		t.Fatalf("no cluster: %+v, %v", cfg, err)
	}
}

func TestClusterProblems(t *testing.T) {
	for _, tc := range []struct {
		name, config, path, want string
	}{
		{"no advertise", clusterConfig(`{}`), "gateway.cluster.advertise", "is required"},
		{"advertise without port", clusterConfig(`{"advertise": "10.0.0.1"}`), "gateway.cluster.advertise", "not host:port"},
		{"advertise without host", clusterConfig(`{"advertise": ":8080"}`), "gateway.cluster.advertise", "not host:port"},
		{"advertise port 0", clusterConfig(`{"advertise": "10.0.0.1:0"}`), "gateway.cluster.advertise", "not host:port"},
		{"zero heartbeat", clusterConfig(`{"advertise": "a:1", "heartbeat": "0s"}`), "gateway.cluster.heartbeat", "must be positive"},
		{"short max age", clusterConfig(`{"advertise": "a:1", "sessionMaxAge": "30s"}`), "gateway.cluster.sessionMaxAge", "at least 1m"},
		{"redis without url", clusterConfig(`{"advertise": "a:1", "redis": {}}`), "gateway.cluster.redis.url", "is required"},
		{"redis http url", clusterConfig(`{"advertise": "a:1", "redis": {"url": "http://r:1"}}`), "gateway.cluster.redis.url", "not a redis://"},
		{"unknown key", clusterConfig(`{"advertise": "a:1", "peers": []}`), "gateway.cluster.peers", ""},
		{"no seal keys", sealConfig(`"cluster": {"advertise": "a:1"}`), "gateway.cluster", "needs seal keys"},
		// The replicas forward to each other in plain HTTP: a TLS listener
		// would answer every forwarded request 400.
		{"with tls", sealConfig(`"sealKeys": [{"id": "k1", "key": "` + sealSecret(1) + `"}], "tls": {"certFile": "/c.crt", "keyFile": "/c.key"}, "cluster": {"advertise": "a:1"}`),
			"gateway.cluster", "not with gateway.tls"},
	} {
		_, err := Parse([]byte(tc.config), nil)
		if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %s: ...%s", tc.name, err, tc.path, tc.want)
		}
	}
}
