package deploy

import (
	"strings"
	"testing"
)

// TestHelmRefusesReplicas: sessions live in one pod, so the chart renders
// replicaCount 0 or 1 and refuses any other number with a message saying
// why, whatever type the number has (Helm's values file gives float64,
// --set int64, --set-string a string).
func TestHelmRefusesReplicas(t *testing.T) {
	for _, n := range []any{0, 1, 1.0, int64(1), "1"} {
		values := defaultValues(t)
		values["replicaCount"] = n
		r := renderChart(t, chartDir, values)
		spec := r.object(t, "Deployment")["spec"].(map[string]any)
		if got := spec["replicas"]; got != toInt(n) {
			t.Errorf("replicaCount %#v: replicas %#v", n, got)
		}
	}
	for _, n := range []any{2, 3.0, int64(5), "3", -1} {
		values := defaultValues(t)
		values["replicaCount"] = n
		_, err := tryRenderChart(t, chartDir, values)
		if err == nil {
			t.Errorf("replicaCount %#v rendered", n)
			continue
		}
		for _, want := range []string{"deployment.yaml", "replicaCount: ", "is not supported: must be 0 or 1", "session"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("replicaCount %#v: error %q lacks %q", n, err, want)
			}
		}
	}
}
