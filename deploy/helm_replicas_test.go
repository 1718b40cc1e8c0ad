package deploy

import (
	"path/filepath"
	"strings"
	"testing"
)

// clusterValues are the chart's defaults with ci/cluster-values.yaml over
// them: three replicas, cluster.enabled, Redis and the seal keys from
// Secrets.
func clusterValues(t *testing.T) map[string]any {
	t.Helper()
	return mergeValues(defaultValues(t), readYAML(t, filepath.Join(chartDir, "ci", "cluster-values.yaml")))
}

// TestHelmReplicas: without cluster.enabled the chart renders
// replicaCount 0 or 1 and refuses more, naming the value and what it
// needs, whatever type the number has (Helm's values file gives float64,
// --set int64, --set-string a string); with cluster.enabled it renders
// any number.
func TestHelmReplicas(t *testing.T) {
	replicas := func(values map[string]any) any {
		return dig(t, renderChart(t, chartDir, values).object(t, "Deployment"), "spec", "replicas")
	}
	for _, n := range []any{0, 1, 1.0, int64(1), "1"} {
		values := defaultValues(t)
		values["replicaCount"] = n
		if got := replicas(values); got != toInt(n) {
			t.Errorf("replicaCount %#v: replicas %#v", n, got)
		}
	}
	for _, n := range []any{2, 3.0, int64(5), "3"} {
		values := defaultValues(t)
		values["replicaCount"] = n
		_, err := tryRenderChart(t, chartDir, values)
		if err == nil {
			t.Errorf("replicaCount %#v rendered without cluster.enabled", n)
			continue
		}
		for _, want := range []string{"deployment.yaml", "replicaCount: " + toString(toInt(n)) + " needs cluster.enabled: true", "404 (session not found)", "Running more than one replica"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("replicaCount %#v: error %q lacks %q", n, err, want)
			}
		}

		values = clusterValues(t)
		values["replicaCount"] = n
		if got := replicas(values); got != toInt(n) {
			t.Errorf("replicaCount %#v with cluster.enabled: replicas %#v", n, got)
		}
	}
	values := defaultValues(t)
	values["replicaCount"] = -1
	if _, err := tryRenderChart(t, chartDir, values); err == nil || !strings.Contains(err.Error(), "replicaCount: -1 must be 0 or more") {
		t.Errorf("replicaCount -1: %v", err)
	}
}

// TestHelmClusterRefusals: values that would give replicas unable to
// share sessions, or a cluster the chart cannot render, fail the render
// with a message naming the value to change.
func TestHelmClusterRefusals(t *testing.T) {
	tests := []struct {
		name string
		over map[string]any
		want string
	}{
		{"no seal keys", map[string]any{"sealKeys": map[string]any{"existingSecret": ""}},
			"cluster.enabled needs sealKeys.existingSecret"},
		{"seal keys twice", map[string]any{"config": map[string]any{"gateway": map[string]any{"sealKeyFile": "/k.json"}}},
			"sealKeys.existingSecret: config already sets gateway.sealKeys or gateway.sealKeyFile"},
		{"redis twice", map[string]any{"cluster": map[string]any{"redis": map[string]any{"url": "redis://r:6379/0"}}},
			"cluster.redis.url: set it or cluster.redis.existingSecret, not both"},
		{"autoscaling without a cluster", map[string]any{"cluster": map[string]any{"enabled": false}, "sealKeys": map[string]any{"existingSecret": ""}, "replicaCount": 1,
			"autoscaling": map[string]any{"enabled": true}},
			"autoscaling.enabled with maxReplicas: 5 needs cluster.enabled: true"},
		{"autoscaling without a CPU request", map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": ""}}, "autoscaling": map[string]any{"enabled": true}},
			"autoscaling.enabled needs resources.requests.cpu"},
		{"autoscaling bounds", map[string]any{"autoscaling": map[string]any{"enabled": true, "minReplicas": 4, "maxReplicas": 3}},
			"autoscaling.maxReplicas: 3 and minReplicas: 4"},
		{"configJson not JSON", map[string]any{"configJson": "{mcpServers"},
			"configJson: is not plain JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := mergeValues(clusterValues(t), tt.over)
			_, err := tryRenderChart(t, chartDir, values)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
	// The cluster's values render as they are, so each refusal above is
	// the value it changes.
	renderChart(t, chartDir, clusterValues(t))
	// gateway.sealKeys in config take the place of sealKeys.existingSecret.
	values := mergeValues(clusterValues(t), map[string]any{
		"sealKeys": map[string]any{"existingSecret": ""},
		"config":   map[string]any{"gateway": map[string]any{"sealKeys": []any{map[string]any{"id": "a", "key": "${MCPGATE_SEAL_KEY}"}}}},
	})
	renderChart(t, chartDir, values)
}
