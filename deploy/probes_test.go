package deploy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/gateway"
)

// TestProbePathsServed asks a running gateway for every probe path the
// packages use (the Node image's HEALTHCHECK, Traefik's health check in
// compose, the chart's liveness and readiness probes): each must answer
// 200 with JSON, so a renamed route fails here rather than in a cluster.
func TestProbePathsServed(t *testing.T) {
	defer goleak.VerifyNone(t)

	node := checkDockerfile(t, "docker/Dockerfile.node")
	compose := checkCompose(t)
	helm := checkRendered(t, renderChart(t, chartDir, defaultValues(t)))
	paths := map[string]string{
		"Dockerfile.node HEALTHCHECK": node.healthPath,
		"compose traefik healthcheck": compose.healthPath,
		"helm livenessProbe":          helm.liveness,
		"helm readinessProbe":         helm.readiness,
	}

	// A remote server starts no process and counts as ready.
	cfg, err := config.Parse([]byte(`{"mcpServers": {"remote": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gateway.Serve(ctx, ln, cfg, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	// The listener queues connections until Serve accepts them: no wait.
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for who, path := range paths {
		resp, err := client.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Errorf("%s: GET %s: %v", who, path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !json.Valid(body) {
			t.Errorf("%s: GET %s: %d %q, want 200 and JSON", who, path, resp.StatusCode, body)
		}
	}
}
