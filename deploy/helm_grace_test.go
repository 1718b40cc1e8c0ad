package deploy

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// stopSpare is what templates/_grace.tpl adds to the preStop sleep and
// the drain for the servers to stop.
const stopSpare = 15 * time.Second

// TestHelmTerminationGrace: left empty, terminationGracePeriodSeconds is
// the preStop sleep + gateway.drainTimeout (rounded up to a second; the
// gateway's default when the config has none) + stopSpare, which covers
// the servers' stop; a number below that is refused naming the value, one
// above it kept.
func TestHelmTerminationGrace(t *testing.T) {
	defaultDrain := config.Defaults().DrainTimeout
	tests := []struct {
		drain    any // gateway.drainTimeout; nil: absent
		preStop  int
		want     time.Duration
		wantHook bool
	}{
		{"10s", 5, 5*time.Second + 10*time.Second + stopSpare, true},
		{"1m30s", 5, 5*time.Second + 90*time.Second + stopSpare, true},
		{"1h", 5, 5*time.Second + time.Hour + stopSpare, true},
		{"1500ms", 5, 5*time.Second + 2*time.Second + stopSpare, true},
		{"1ms", 0, time.Second + stopSpare, false},
		{nil, 5, 5*time.Second + defaultDrain + stopSpare, true},
		{nil, 0, defaultDrain + stopSpare, false},
	}
	for _, tt := range tests {
		values := defaultValues(t)
		gw := map[string]any{}
		if tt.drain != nil {
			gw["drainTimeout"] = tt.drain
		}
		values["config"] = map[string]any{"mcpServers": dig(t, values, "config", "mcpServers"), "gateway": gw}
		values["preStopSleepSeconds"] = tt.preStop
		r := renderChart(t, chartDir, values)
		pod, c := container(t, r)
		grace := time.Duration(dig(t, pod, "terminationGracePeriodSeconds").(int)) * time.Second
		if grace != tt.want {
			t.Errorf("drainTimeout %v, preStop %d: grace %v, want %v", tt.drain, tt.preStop, grace, tt.want)
		}
		cfg := loadChartConfig(t, r, nil)
		if min := time.Duration(tt.preStop)*time.Second + stopBudget(cfg); grace <= min {
			t.Errorf("drainTimeout %v, preStop %d: grace %v is not above preStop, drain and stop, %v", tt.drain, tt.preStop, grace, min)
		}
		if _, hook := c["lifecycle"]; hook != tt.wantHook {
			t.Errorf("preStop %d: lifecycle %v", tt.preStop, c["lifecycle"])
		}
	}

	// Set by the user: kept when enough, else refused.
	values := defaultValues(t)
	values["terminationGracePeriodSeconds"] = 600
	pod, _ := container(t, renderChart(t, chartDir, values))
	if got := dig(t, pod, "terminationGracePeriodSeconds"); got != 600 {
		t.Errorf("terminationGracePeriodSeconds 600 rendered as %v", got)
	}
	values["terminationGracePeriodSeconds"] = 20
	_, err := tryRenderChart(t, chartDir, values)
	if err == nil || !strings.Contains(err.Error(), "terminationGracePeriodSeconds: 20 is below 30: preStopSleepSeconds (5) + gateway.drainTimeout (10s) + 15 s") {
		t.Errorf("terminationGracePeriodSeconds 20: %v", err)
	}

	// Durations the chart cannot read are refused naming the key, never
	// guessed at.
	for _, drain := range []string{"1.5s", "10", "2us", "-1s"} {
		values := defaultValues(t)
		values["config"] = map[string]any{"mcpServers": dig(t, values, "config", "mcpServers"), "gateway": map[string]any{"drainTimeout": drain}}
		_, err := tryRenderChart(t, chartDir, values)
		if err == nil || !strings.Contains(err.Error(), "gateway.drainTimeout: \""+drain+"\": the chart reads durations written in whole h, m, s or ms") {
			t.Errorf("drainTimeout %q: %v", drain, err)
		}
	}
	// The default values give 30 s, the chart's fixed value before it
	// was computed.
	pod, _ = container(t, renderChart(t, chartDir, defaultValues(t)))
	if got := dig(t, pod, "terminationGracePeriodSeconds"); got != 30 {
		t.Errorf("default terminationGracePeriodSeconds %v, want 30 as before", got)
	}
}
